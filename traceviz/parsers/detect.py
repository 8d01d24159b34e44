"""Which parser reads a file: decided from its content, not only its name."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceviz.errors import TraceVizError
from traceviz.files.fileio import check_readable
from traceviz.files.folders import (
    describe_folder,
    is_nsys_folder,
    is_rank_folder,
    is_xplane_dir,
    run_trace,
)
from traceviz.system.heap import release_free_memory
from traceviz.trace import Trace

FORMATS = ("parquet", "kineto", "nsys-sqlite", "nsys-arrow", "nsys-dir", "nsys-rep", "mxnet",
           "xplane")
_JSON_START = re.compile(rb"^\s*[\[{]")
_ARROW_STREAM = b"\xff\xff\xff\xff"  # IPC continuation marker
_NSYS_REPORTS = (b"NVIDIA Tegra Profiler Report", b"U3w[END]NVIDIA")


def _first_text(path: Path, window: int = 1 << 16) -> bytes:
    """The (decompressed) file's first ``window`` bytes after any leading white space."""
    from traceviz.files.fileio import open_input

    with open_input(path) as f:
        while True:
            block = f.read(window)
            if not block:
                return b""
            text = block.lstrip()
            if text:
                return text + f.read(max(0, window - len(text)))


def detect_format(path: Path) -> str:
    """One of ``FORMATS``; raises TraceVizError for anything unrecognised."""
    path = Path(path)
    if path.is_dir() and is_nsys_folder(path):
        return "nsys-dir"
    if path.is_dir():
        if is_xplane_dir(path) and not is_rank_folder(path):
            return "xplane"

        raise TraceVizError(describe_folder(path))
    check_readable(path)
    with open(path, "rb") as f:
        magic = f.read(32)
    if magic.startswith(b"PAR1"):
        return "parquet"
    if magic.startswith(b"SQLite format 3\x00"):
        return "nsys-sqlite"
    if ".xplane.pb" in path.name:  # protobuf has no magic number: the TF/JAX file name
        return "xplane"
    if magic.startswith(_NSYS_REPORTS) or path.suffix in (".nsys-rep", ".qdrep", ".qdstrm"):
        return "nsys-rep"
    if magic.startswith(_ARROW_STREAM) or path.suffix == ".arrow":
        return "nsys-arrow"
    head = _first_text(path)
    if not head:
        raise TraceVizError(f"{path}: file is empty (nothing but white space)")
    if _JSON_START.match(head):
        from traceviz.parsers.mxnet import looks_like_mxnet

        return "mxnet" if looks_like_mxnet(head) else "kineto"
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
    fmt = detect_format(path)
    if fmt == "parquet":
        return Trace.load(path, rows=rows)
    trace = _parse(path, fmt, progress)
    release_free_memory()  # the parser's transient objects are gone only now
    from traceviz.files.runfolder import folder_meta, run_of

    run_dir = run_of(path)
    if run_dir is not None:  # the raw trace of a run: its timings and settings with it
        trace.meta.update(folder_meta(run_dir))
    return trace


def _parse(path: Path, fmt: str, progress: Callable[[int], None] | None) -> Trace:
    if fmt == "kineto":
        from traceviz.parsers import kineto

        return kineto.parse(path, progress=progress)
    if fmt == "mxnet":
        from traceviz.parsers import mxnet

        return mxnet.parse(path)
    if fmt.startswith("nsys-"):
        from traceviz.parsers import nsys

        return nsys.parse(path, fmt)
    if fmt == "xplane":
        from traceviz.parsers import xplane

        return xplane.parse(path)
    raise TraceVizError(f"{path}: {fmt} traces are not supported by this version of traceviz yet")
