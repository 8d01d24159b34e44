"""``traceviz amp``: what mixed precision cost and saved between an FP32 and an AMP run."""

from __future__ import annotations

import argparse
from pathlib import Path

from traceviz.cli.base import (
    Command,
    chart_paths,
    json_text,
    load_runs,
    refuse_existing,
    stderr,
    stdout,
    width_arg,
    write_charts,
)
from traceviz.errors import UsageError


class AmpCommand(Command):
    name = "amp"
    help = "what mixed precision cost (casts) and saved (gemm/attention/rnn time) between two runs"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("fp32", type=Path, help="the FP32 run (folder, .parquet or raw trace)")
        p.add_argument("amp", type=Path, help="the same run under --amp fp16|bf16")
        p.add_argument("--plot", type=Path, metavar="DIR", help="write amp_waterfall.{png,svg}")
        p.add_argument("--force", action="store_true", help="replace existing chart files")
        p.add_argument("--json", action="store_true", help="print the breakdown as JSON")
        p.add_argument("--width", type=width_arg,
                       help="terminal width for the table (at least 40 columns)")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.analyses.compare.amp_breakdown import amp_breakdown, differs_only_in_amp
        from traceviz.analyses.compare.runs import run_figures
        from traceviz.render.terminal.runs_view import amp_render

        if args.plot:
            refuse_existing(chart_paths(args.plot, ["amp_waterfall"]), args.force)
        (la, ta), (lb, tb) = load_runs([args.fp32, args.amp])
        a, b = run_figures(ta, la), run_figures(tb, lb)
        if a.meta.get("amp") is not None:
            raise UsageError(f"{args.fp32}: this run used --amp {a.meta['amp']}; "
                             "give the FP32 run first")
        if a.meta.get("model") and not differs_only_in_amp(a, b):
            stderr().print("[yellow]note:[/] the runs differ in more than --amp (model, "
                           "workload or device); the breakdown mixes those differences in")
        br = amp_breakdown(a, b)
        from traceviz.analyses.compare.amp_precision import precision_mismatch

        mismatch = precision_mismatch(tb)
        if args.json:
            print(json_text({"fp32": la, "amp": lb, **br.to_dict(), "precision_mismatch":
                             mismatch.to_dict() if mismatch else None}))
        else:
            out = stdout(args.width)
            out.print(amp_render(br, la, lb, out.width))
            if mismatch is not None:
                from rich.text import Text

                out.print(Text.assemble(("note: ", "yellow"),
                                        f"the AMP run {mismatch.text()}"))
        if args.plot:
            from traceviz.render.charts import amp_waterfall

            write_charts(args.plot, {"amp_waterfall": amp_waterfall(br, la, lb)}, args.force)
        return 0
