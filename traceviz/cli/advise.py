"""``traceviz advise``: findings with evidence, estimated saving and an action; on a folder
of rank traces (or its dataset), the job's: every rank's verdict, the slowest rank's
findings and the job's arrivals at its collectives."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from traceviz.cli.base import (
    Command,
    add_peak,
    json_text,
    load_with_progress,
    memory_limit_arg,
    peak_of,
    progress_bar,
    read_ahead,
    stderr,
    stdout,
    width_arg,
)


class AdviseCommand(Command):
    name = "advise"
    help = "say what to do next: findings with evidence, an estimated saving and an action"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("trace", type=Path,
                       help="a capture's run folder, a traceviz .parquet, any raw trace, a "
                            "folder of rank traces or a rank dataset (the job's advice)")
        p.add_argument("--json", action="store_true", help="print the findings as JSON")
        p.add_argument("--width", type=width_arg, help="terminal width (at least 40 columns)")
        add_peak(p)
        p.add_argument("--memory-limit", metavar="SIZE", type=memory_limit_arg,
                       help="DuckDB's memory limit for a rank dataset (e.g. 2GB; default a "
                            "quarter of this machine's memory)")

    def run(self, args: argparse.Namespace) -> int:
        read_ahead(args.trace)
        from traceviz.analyses.advice.advising import advise_full
        from traceviz.analyses.advice.runkind import run_kind
        from traceviz.files.folders import is_dataset, is_rank_folder

        peak = peak_of(args)  # a wrong --peak before reading the trace
        if is_dataset(args.trace) or is_rank_folder(args.trace):
            return self.run_ranks(args)
        with ExitStack() as stack:
            trace = load_with_progress(args.trace, stack)
        advice = advise_full(trace, peak)
        run = run_kind(trace)
        if args.json:
            out = advice.to_dict()
            # what the run is, beside what bounds its step
            print(json_text({**{k: out[k] for k in ("steps", "timed_step", "bound")},
                             "run": run.to_dict(), "findings": out["findings"]},
                            default=int))
            return 0
        from traceviz.render.terminal.advice import advice_render

        stdout(args.width).print(advice_render(advice.findings, advice.steps, advice.timed,
                                               advice.bound, run))
        return 0

    def run_ranks(self, args: argparse.Namespace) -> int:
        """The job's advice: its slowest rank's verdict and findings, and its arrivals."""
        job, _ = advise_job(args.trace, args.memory_limit, peak_of(args))
        if args.json:
            print(json_text(job.to_dict(), default=int))
            return 0
        from traceviz.render.terminal.advice import job_advice_render

        out = stdout(args.width)
        out.print(job_advice_render(job, width=out.width))
        return 0


def advise_job(path: Path, memory_limit: str | None = None, peak: Any = None
               ) -> tuple[Any, Any]:
    """A rank folder's or dataset's ``JobAdvice`` and its slowest rank's trace, with a
    progress bar over the ranks (each read twice: figures, then verdict; ``peak``: the
    ``--peak`` its findings are rated by)."""
    from rich.progress import MofNCompleteColumn, TimeElapsedColumn

    from traceviz.rankset.rank_advice import advise_ranks

    with progress_bar(stderr(), MofNCompleteColumn(), TimeElapsedColumn(),
                      description="ranks") as bar:
        task = bar.add_task("ranks", total=None)
        return advise_ranks(path, memory_limit, lambda done, total:
                            bar.update(task, completed=done, total=total), peak=peak)
