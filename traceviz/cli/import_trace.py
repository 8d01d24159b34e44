"""``traceviz import``: a raw trace into a traceviz .parquet table."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from traceviz.cli.base import (
    Command,
    load_with_progress,
    progress_bar,
    read_ahead,
    refuse_existing,
    stderr,
)
from traceviz.errors import UsageError
from traceviz.files.folders import default_stem


class ImportCommand(Command):
    name = "import"
    help = ("convert a raw trace (torch.profiler JSON[.gz], nsys .sqlite/.arrow/.nsys-rep or "
            "parquetdir/arrowdir, TF/JAX .xplane.pb[.gz] or its log directory, MXNet JSON) "
            "into a traceviz .parquet table")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("raw", type=Path,
                       help="raw trace file (format detected from content), or a folder of "
                            "rank traces (then -o names the dataset folder)")
        p.add_argument("-o", "--output", type=Path,
                       help="output .parquet (default: <raw name>.parquet in the current "
                            "folder); for a rank folder, the dataset folder (required)")
        p.add_argument("--force", action="store_true", help="replace an existing output file")
        p.add_argument("--workers", type=int, metavar="N",
                       help="rank folder: ranks imported at once (default: one per core)")
        p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                       help="rank folder: import the ranks as Ray tasks on the cluster at "
                            "ADDRESS (default $RAY_ADDRESS, else a local Ray); the folders "
                            "must be on a path the workers see")

    def run(self, args: argparse.Namespace) -> int:
        read_ahead(args.raw)
        from traceviz.files.folders import is_rank_folder

        if is_rank_folder(args.raw):
            return self.run_folder(args)
        if args.ray is not None or args.workers is not None:
            raise UsageError("applies to a folder of rank traces", option="ray"
                             if args.ray is not None else "workers")
        from traceviz.parsers.detect import check_loadable

        check_loadable(args.raw)  # an empty folder: say so, not that the output exists
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
            stderr().print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
        return 0


    def run_folder(self, args: argparse.Namespace) -> int:
        from rich.progress import MofNCompleteColumn, TimeElapsedColumn

        from traceviz.files.folders import DATASET_META
        from traceviz.rankset.folder import import_folder, import_rank

        if args.output is None:
            raise UsageError("is required for a folder of rank traces: the dataset folder "
                             "to write", option="output")
        refuse_existing([args.output / DATASET_META], args.force)
        if args.workers is not None and args.workers < 1:
            raise UsageError("must be at least 1", option="workers")
        job_map = None
        if args.ray is not None:
            from traceviz.system.cluster import ray_map

            job_map = ray_map(import_rank, args.ray or None)
        with progress_bar(stderr(), MofNCompleteColumn(), TimeElapsedColumn(),
                          description="importing ranks") as bar:
            task = bar.add_task("ranks", total=None)
            meta = import_folder(args.raw, args.output, workers=args.workers,
                                 job_map=job_map, force=args.force,
                                 on_rank=lambda d, n: bar.update(task, completed=d, total=n))
        events = sum(r["events"] for r in meta["ranks"].values())
        Console(soft_wrap=True).print(
            f"wrote [bold]{args.output}[/]: {len(meta['ranks'])} ranks (rank=N/part-0.parquet, "
            f"{DATASET_META}), {events:,} events; ranks numbered {meta['numbered']}")
        return 0
