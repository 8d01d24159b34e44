"""Which parser reads a file: decided from its content, not only its name, by the rows of
``formats.FORMATS`` in order; ``load`` reads it with the row's parser."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceviz.errors import TraceVizError
from traceviz.files.fileio import check_readable
from traceviz.files.folders import describe_folder, run_trace
from traceviz.parsers.formats import FORMATS, Probe, format_named
from traceviz.system.heap import release_free_memory
from traceviz.trace import Trace


def detect_format(path: Path) -> str:
    """The name of the first row of ``formats.FORMATS`` that claims ``path``; raises
    TraceVizError for anything unrecognised."""
    path = Path(path)
    probe = Probe(path)
    if not probe.is_dir:
        check_readable(path)
    for fmt in FORMATS:
        if fmt.claims(probe):
            return fmt.name
    if probe.is_dir:
        raise TraceVizError(describe_folder(path))
    head = probe.text
    if head.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        utf = "UTF-8" if head.startswith(b"\xef") else "UTF-16"
        raise TraceVizError(f"{path}: starts with a {utf} byte order mark (BOM), which a trace "
                            "(JSON in UTF-8) does not have: save it as UTF-8 without a BOM")
    raise TraceVizError(
        f"{path}: unrecognised trace format (expected torch.profiler JSON, "
        "a traceviz .parquet, an nsys export or report, or a TF/JAX .xplane.pb)"
    )


def check_loadable(path: str | Path) -> None:
    """Raise what ``load`` would for an input it cannot read at all (missing, unreadable,
    empty, of no known format, a folder holding no trace), from a look at its first bytes:
    a command checks its input before refusing an existing output."""
    path = Path(path)
    if not (path.is_dir() and (path / "trace.parquet").is_file()):
        detect_format(run_trace(path) or path if path.is_dir() else path)


def load(path: str | Path, progress: Callable[[int], None] | None = None,
         rows: Any = None) -> Trace:
    """Read any supported trace file (or a capture's run folder) into a ``Trace``.
    ``rows``: see ``Trace.load`` (applies to traceviz Parquet; a raw trace is parsed whole)."""
    path = Path(path)
    if path.is_dir() and (path / "trace.parquet").is_file():
        return Trace.load(path / "trace.parquet", rows=rows)
    raw = run_trace(path) if path.is_dir() else None
    if raw is not None:  # a run folder copied without its Parquet: its raw trace
        path = raw
    fmt = format_named(detect_format(path))
    if fmt.parse is None:  # a traceviz table: read as saved
        return Trace.load(path, rows=rows)
    trace = fmt.parse(path, progress)
    release_free_memory()  # the parser's transient objects are gone only now
    from traceviz.files.runfolder import folder_meta, run_of

    run_dir = run_of(path)
    if run_dir is not None:  # the raw trace of a run: its timings and settings with it
        trace.meta.update(folder_meta(run_dir))
    return trace
