"""``traceviz advise``: findings with evidence, estimated saving and an action."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path

from traceviz.cli.base import Command, json_text, load_with_progress, stdout, width_arg


class AdviseCommand(Command):
    name = "advise"
    help = "say what to do next: findings with evidence, an estimated saving and an action"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("trace", type=Path,
                       help="a capture's run folder, a traceviz .parquet or any raw trace")
        p.add_argument("--json", action="store_true", help="print the findings as JSON")
        p.add_argument("--width", type=width_arg, help="terminal width (at least 40 columns)")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.analyses.advice.engine import advise_full
        from traceviz.analyses.advice.runkind import run_kind

        with ExitStack() as stack:
            trace = load_with_progress(args.trace, stack)
        advice = advise_full(trace)
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
