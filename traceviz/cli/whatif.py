"""``traceviz whatif``: replay a trace, then replay it changed by each scenario."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from traceviz.cli.base import (
    Command,
    LazyHelp,
    add_peak,
    json_text,
    load_with_progress,
    peak_of,
    read_ahead,
    stdout,
    width_arg,
)


def _scenario_help() -> str:
    """Every scenario of the registry, as ``--scenario`` takes it, and the default set."""
    from traceviz.analyses.whatif.scenarios import DEFAULT_SCENARIOS, SCENARIOS

    names = ", ".join(f"{n}=X" if s.takes_factor else n for n, s in SCENARIOS.items())
    return (f"{names}; several joined by + apply together in one replay (repeatable; "
            f"default: {', '.join(DEFAULT_SCENARIOS)})").replace("%", "%%")


class WhatIfCommand(Command):
    name = "whatif"
    help = "predict what an optimization buys: replay the trace as recorded and changed"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("trace", type=Path,
                       help="a traceviz .parquet, any raw trace, a capture's run folder, a "
                            "folder of rank traces or a rank dataset (every rank replayed "
                            "together)")
        p.add_argument("--scenario", action="append", metavar="NAME[=X][+NAME...]",
                       help=LazyHelp(_scenario_help))
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--brief", action="store_true",
                       help="one screen: the scenarios' figures without their assumptions")
        p.add_argument("--width", type=width_arg, help="terminal width (at least 40 columns)")
        add_peak(p)

    def run(self, args: argparse.Namespace) -> int:
        read_ahead(args.trace)
        from traceviz.analyses.whatif.engine import whatif
        from traceviz.analyses.whatif.scenarios import DEFAULT_SCENARIOS, parse_scenarios

        scenarios = tuple(args.scenario or DEFAULT_SCENARIOS)
        for s in scenarios:  # usage errors before reading the trace
            parse_scenarios(s)
        peak = peak_of(args)
        if _job(args.trace):
            return _ranks(args, scenarios)
        with ExitStack() as stack:
            trace = load_with_progress(args.trace, stack)
        from traceviz.render.terminal.advice import whatif_render

        return _show(args, whatif(trace, scenarios, peak), whatif_render)


def _job(path: Path) -> bool:
    """A rank dataset, or a folder of several rank traces (as ``analyze`` tells them: not
    a run folder, an nsys table folder, a TensorBoard log directory)."""
    from traceviz.files.folders import is_dataset, is_rank_folder, rank_files

    return is_dataset(path) or is_rank_folder(path) and len(rank_files(path)) > 1


def _ranks(args: argparse.Namespace, scenarios: tuple[str, ...]) -> int:
    """Every rank replayed, its collectives joined with the other ranks'."""
    from traceviz.analyses.whatif.all_ranks import whatif_ranks
    from traceviz.rankset.rank_advice import job_traces
    from traceviz.render.terminal.advice import ranks_whatif_render

    return _show(args, whatif_ranks(job_traces(args.trace), scenarios, peak_of(args)),
                 ranks_whatif_render)


def _show(args: argparse.Namespace, result: Any, render: Callable[..., Any]) -> int:
    """One trace's or one job's replay: as JSON, or rendered to the terminal."""
    if args.json:
        print(json_text(result.to_dict()))
        return 0
    out = stdout(args.width)
    out.print(render(result, brief=args.brief, width=out.width))
    return 0
