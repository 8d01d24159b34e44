"""``traceviz import``: a raw trace into a traceviz .parquet table."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console

from traceviz.cli.base import Command, load_with_progress, refuse_existing, stderr

RAW_SUFFIXES = (".gz", ".json", ".pt.trace", ".trace", ".sqlite", ".arrow", ".nsys-rep",
                ".parquetdir", ".arrowdir")


class ImportCommand(Command):
    name = "import"
    help = ("convert a raw trace (torch.profiler JSON[.gz], nsys .sqlite/.arrow/.nsys-rep or "
            "parquetdir/arrowdir, TF/JAX .xplane.pb[.gz] or its log directory, MXNet JSON) "
            "into a traceviz .parquet table")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("raw", type=Path, help="raw trace file; format detected from content")
        p.add_argument("-o", "--output", type=Path,
                       help="output .parquet (default: <raw name>.parquet in the current folder)")
        p.add_argument("--force", action="store_true", help="replace an existing output file")

    def run(self, args: argparse.Namespace) -> int:
        out = args.output or Path(default_stem(args.raw) + ".parquet")
        refuse_existing([out], args.force)
        with ExitStack() as stack:
            trace = load_with_progress(args.raw, stack)
        trace.save(out, force=args.force)
        ev = trace.events
        kinds = ev["kind"].value_counts()
        parts = ", ".join(f"{kinds.get(k, 0):,} {label}" for k, label in (
            ("kernel", "kernels"), ("runtime", "runtime calls"), ("op", "ops"),
            ("step", "steps")))
        Console(soft_wrap=True).print(f"wrote [bold]{out}[/]: {len(ev):,} events ({parts})")
        for note in trace.meta.get("notes") or []:
            stderr().print(f"[yellow]note:[/] {note}", soft_wrap=True)
        return 0


def default_stem(path: Path) -> str:
    name = path.name
    for suffix in RAW_SUFFIXES:
        name = name.removesuffix(suffix)
    return name or "trace"
