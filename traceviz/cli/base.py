"""What every command shares: the command shape, consoles, the progress bar, loading a
trace, and safe output files. Only the ``traceviz.cli`` package prints or writes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console
from rich.segment import Segment

from traceviz.errors import UsageError
from traceviz.files.fileio import atomic_output, check_output, is_gzip, output_folder
from traceviz.render.escape import console_text

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn

    # pandas and pyarrow come with Trace: imported where a command reads a trace, so that
    # --help and usage errors answer without them
    from traceviz.trace import Trace

PROGRESS_MIN_BYTES = 16 << 20


class Command(Protocol):
    """One subcommand (memray style): its name and help, its arguments, and ``run``
    returning the exit status."""

    name: str
    help: str

    def add_arguments(self, p: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class _Console(Console):
    """A console that shows the control characters in what it prints (``\\x1b``) rather
    than sending them: the last guard for names from traces that reach the terminal by a
    path that did not escape them (tables escape before fitting, ``escape.visible``)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control else Segment(console_text(seg.text), seg.style)
            for seg in buffer)

    def on_broken_pipe(self) -> None:
        """The reader went away (``traceviz analyze T | head``): what is left goes nowhere,
        and the command ends as it does on any broken pipe (``cli._run``: status 0, no
        message), where rich's own handler exits with status 1. ``analyze`` prints each
        section as it comes, so a reader that stops early meets this."""
        self.quiet = True
        try:
            fd = self.file.fileno()  # this console's stream (stdout, or stderr)
        except (AttributeError, OSError, ValueError):
            fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)  # the last flush at exit writes nowhere
        os.close(devnull)
        raise BrokenPipeError


def stderr() -> Console:
    return _Console(stderr=True)


MIN_WIDTH = 40


def width_arg(text: str) -> int:
    """``--width``: a whole number of columns, at least MIN_WIDTH (narrower tables are
    unreadable, and rich prints nothing at all below 1)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < MIN_WIDTH:
        raise argparse.ArgumentTypeError(f"at least {MIN_WIDTH} columns, not {value}")
    return value


PEAK_HELP = ("the device's peaks for %% of peak: a device of the table "
             "('h100 pcie'), KEY=VALUE,... (TFLOP/s: fp64, fp32, tf32, fp16, "
             "bf16, fp8, fp64_matrix, fp32_matrix; bw in GB/s) or a JSON file "
             "of those keys (default: matched from the trace's device name)")


def add_peak(p: argparse.ArgumentParser) -> None:
    """``--peak``, alike in every command that rates work against the device's peaks."""
    p.add_argument("--peak", metavar="SPEC", help=PEAK_HELP)


def peak_of(args: argparse.Namespace) -> Any:
    """The ``peaks.Peak`` that ``--peak`` gives (None: not given, the trace's device's)."""
    if not args.peak:
        return None
    from traceviz.opcost.peaks import parse_peak

    return parse_peak(args.peak)


def memory_limit_arg(text: str) -> str:
    """``--memory-limit``: a size DuckDB understands (``2GB``, ``512MiB``)."""
    from traceviz.rankset.dataset import parse_memory_limit

    try:
        return parse_memory_limit(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(e.message) from None


class LazyHelp(str):
    """A help text computed only when ``--help`` prints it: argparse formats every help
    with ``help % params``, which this computes. For a text drawn from a registry whose
    import costs a second (the what-if scenarios import the replay), so that building
    the parser, which every command does, does not pay for it."""

    _make: Callable[[], str]

    def __new__(cls, make: Callable[[], str]) -> LazyHelp:
        obj = super().__new__(cls, "(computed when shown)")
        obj._make = make
        return obj

    def __mod__(self, params: Any) -> str:
        return self._make() % params


def stdout(width: int | None = None) -> Console:
    """The console for results: the terminal's width, or 120 columns into pipes and logs.
    No markup: results hold names from traces (``kernel[/cfg]``, ``f(T) [with T =
    float]``) that rich would read as style tags (a crash, or text lost); styles come
    as ``Text`` objects. No emoji codes either: ``:name:`` in a text stays as written (and
    rich's table of emoji is never loaded)."""
    console = _Console(width=width, markup=False, emoji=False)
    if width is None and not console.is_terminal:
        console = _Console(width=120, markup=False, emoji=False)
    return console


def progress_bar(console: Console, *columns: ProgressColumn,
                 description: str = "{task.description}", keep: bool = False) -> Progress:
    """The one progress bar of the CLI: a description, a bar, then ``columns``; shown only
    on a terminal (silent in logs), and left on screen when done if ``keep``."""
    from rich.progress import BarColumn, Progress, TextColumn

    return Progress(TextColumn(description), BarColumn(), *columns, console=console,
                    transient=not keep, disable=not console.is_terminal)


def read_ahead(path: Path) -> None:
    """Start reading a small Kineto trace on a thread, before the command imports pandas
    and its analyses (``parsers.kineto.prefetch``), with the garbage collector paused for
    those imports (``system.collector``) and numpy's BLAS on one thread
    (``system.blas``); ``load_with_progress`` takes what it read and resumes the
    collector. Call it first thing in a command that reads ``path``.

    Where pandas is imported already (``main`` called in a test's or a notebook's process)
    there are no imports to read beside, and nothing is read ahead: a read the command
    never took (it failed before reading) would be held for the process's life."""
    from traceviz.parsers.kineto import prefetch
    from traceviz.system import blas, collector

    collector.pause()
    if "pandas" not in sys.modules:
        prefetch.start(path)
    # the first of the imports: numpy's BLAS on one thread (a trace's figures use none)
    blas.import_numpy_with_one_blas_thread()


def load_with_progress(path: Path, stack: ExitStack, rows: Any = None) -> Trace:
    """Load any trace, with a progress bar on stderr for big raw files on a terminal
    (``rows``: see ``Trace.load``)."""
    from traceviz.parsers import load
    from traceviz.parsers.kineto.plan import json_size
    from traceviz.system import collector

    size = path.stat().st_size if path.is_file() else 0
    # the imports are done (``read_ahead``); a small trace's command runs to its end
    # without collections (its size as read: a gzipped file's inflated size)
    collector.resume(small=size > 0 and json_size(path) <= collector.SMALL_BYTES)

    err = stderr()
    progress_cb: Callable[[int], None] | None = None
    if err.is_terminal and size >= PROGRESS_MIN_BYTES:
        from rich.progress import DownloadColumn, TimeElapsedColumn, TransferSpeedColumn

        progress = stack.enter_context(progress_bar(
            err, DownloadColumn(), TransferSpeedColumn(), TimeElapsedColumn(),
            description="reading {task.description}"))
        # gzip: the decompressed size is unknown, so show bytes read without a total
        task = progress.add_task(path.name, total=None if is_gzip(path) else size)
        progress_cb = lambda n: progress.advance(task, n)  # noqa: E731
    trace = load(path, progress=progress_cb, rows=rows)
    if len(trace.events) > collector.SMALL_ROWS:  # a small file of many rows (Parquet)
        collector.resume()
    return trace


def refuse_existing(paths: Sequence[Path], force: bool) -> None:
    """Fail before doing any work if an output would overwrite a file without --force,
    or is not a regular file at all."""
    for p in paths:
        check_output(p, force)


CHART_FORMATS = ("png", "svg")


def chart_paths(directory: Path, names: Sequence[str]) -> list[Path]:
    return [directory / f"{n}.{ext}" for n in names for ext in CHART_FORMATS]


def write_charts(directory: Path, figs: dict, force: bool) -> None:
    """Save each figure as PNG and SVG (atomically) and close it; say so on stderr once
    all are written."""
    import matplotlib.pyplot as plt

    written = []
    with output_folder(directory):
        for name, fig in figs.items():
            for path in chart_paths(directory, [name]):
                with atomic_output(path, force=force) as tmp:
                    fig.savefig(tmp, format=path.suffix[1:], dpi=120, bbox_inches="tight")
                written.append(path)
            plt.close(fig)
    said(f"wrote {p}" for p in written)


def json_text(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``--json``'s text: always valid JSON. A figure that is not a number (NaN, an
    infinity: a record's missing or diverged value) is ``null``, never ``NaN``."""
    import json

    def default_any(x: Any) -> Any:
        if default is not None:
            return _finite(default(x))
        if hasattr(x, "item"):  # numpy scalars
            return _finite(x.item())
        raise TypeError(f"{type(x).__name__} is not JSON")

    return json.dumps(_finite(value), indent=2, default=default_any, allow_nan=False)


def _finite(x: Any) -> Any:
    """``x`` with every float that is not finite, at any depth, as None."""
    import math

    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def said(lines: Iterable[str]) -> None:
    """Tell on stderr what a command wrote, once all of it is written (a failure takes
    back what it wrote, so nothing is reported that is not there); paths never wrap."""
    err = stderr()
    for line in lines:
        err.print(line, soft_wrap=True, markup=False)


def load_runs(paths: list[Path], labels: Sequence[str] | None = None
              ) -> list[tuple[str, Trace]]:
    """Several runs (folders, Parquet or raw traces), each with a distinct label: the
    ``labels`` given (``--label``, one per run), else the run's folder name
    (``files.runfolder.run_names``)."""
    from traceviz.files.runfolder import run_names

    names = check_labels(labels, len(paths)) or run_names(paths)
    runs = []
    for p, name in zip(paths, names, strict=True):
        with ExitStack() as stack:
            runs.append((name, load_with_progress(p, stack)))
    return runs


def check_labels(labels: Sequence[str] | None, n: int) -> list[str] | None:
    """``--label``'s values, one per input, distinct and not blank (None: not given)."""
    if not labels:
        return None
    if len(labels) != n:
        from traceviz.units import plural

        raise UsageError(f"give one per run: {plural(n, 'run')}, "
                         f"{plural(len(labels), 'label')}", option="label")
    for i, text in enumerate(labels):
        if not text.strip():
            raise UsageError("a label is blank", option="label")
        if text in labels[:i]:
            raise UsageError(f"{text!r} is given twice; each run's label differs",
                             option="label")
    return list(labels)


def run_label(path: Path, trace: Trace) -> str:
    meta = trace.meta
    if meta.get("model"):
        return meta["model"] + (f" ({meta['amp']})" if meta.get("amp") else "")
    name = path.name if path.is_dir() else path.name.split(".")[0]
    return name or str(path)
