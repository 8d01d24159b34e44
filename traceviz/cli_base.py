"""What every CLI command shares: the command shape, consoles, safe output files."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console

from traceviz.fileio import atomic_output, check_output, is_gzip
from traceviz.trace import Trace

PROGRESS_MIN_BYTES = 16 << 20


class Command:
    """One subcommand (memray style): arguments, then ``run`` returning an exit status."""

    name: str
    help: str

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        raise NotImplementedError

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError


def stderr() -> Console:
    return Console(stderr=True)


def stdout(width: int | None = None) -> Console:
    """The console for results: the terminal's width, or 120 columns into pipes and logs."""
    console = Console(width=width)
    if width is None and not console.is_terminal:
        console = Console(width=120)
    return console


def load_with_progress(path: Path, stack: ExitStack) -> Trace:
    """Load any trace, with a progress bar on stderr for big raw files on a terminal."""
    from traceviz.parsers import load

    err = stderr()
    progress_cb: Callable[[int], None] | None = None
    size = path.stat().st_size if path.is_file() else 0
    if err.is_terminal and size >= PROGRESS_MIN_BYTES:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TransferSpeedColumn,
        )

        progress = stack.enter_context(Progress(
            TextColumn("reading {task.description}"), BarColumn(), DownloadColumn(),
            TransferSpeedColumn(), TimeElapsedColumn(), console=err, transient=True,
        ))
        gz = is_gzip(path)
        # gzip: the decompressed size is unknown, so show bytes read without a total
        task = progress.add_task(path.name, total=None if gz else size)
        progress_cb = lambda n: progress.advance(task, n)  # noqa: E731
    return load(path, progress=progress_cb)



def refuse_existing(paths: Sequence[Path], force: bool) -> None:
    """Fail before doing any work if an output would overwrite a file without --force,
    or is not a regular file at all."""
    for p in paths:
        check_output(p, force)


CHART_FORMATS = ("png", "svg")


def chart_paths(directory: Path, names: Sequence[str]) -> list[Path]:
    return [directory / f"{n}.{ext}" for n in names for ext in CHART_FORMATS]


def write_charts(directory: Path, figs: dict, force: bool) -> None:
    """Save each figure as PNG and SVG (atomically), say so on stderr, close it."""
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    err = stderr()
    for name, fig in figs.items():
        for path in chart_paths(directory, [name]):
            with atomic_output(path, force=force) as tmp:
                fig.savefig(tmp, format=path.suffix[1:], dpi=120, bbox_inches="tight")
            err.print(f"wrote {path}")
        plt.close(fig)
