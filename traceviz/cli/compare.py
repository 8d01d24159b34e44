"""``traceviz compare``: runs side by side, kernel differences, MPE, AMP pairs."""

from __future__ import annotations

import argparse
from pathlib import Path

from traceviz.cli.base import Command, chart_paths, load_runs, refuse_existing, stdout, write_charts
from traceviz.errors import UsageError


class CompareCommand(Command):
    name = "compare"
    help = "compare runs side by side: timings, busy, launch-bound, categories, kernels, MPE"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("runs", type=Path, nargs="+",
                       help="run folders, trace.parquet files or raw traces (two or more)")
        p.add_argument("--top", type=int, default=12, help="kernel differences to list")
        p.add_argument("--plot", type=Path, metavar="DIR",
                       help="write categories.{png,svg} (and amp_waterfall for an AMP pair)")
        p.add_argument("--force", action="store_true", help="replace existing chart files")

    def run(self, args: argparse.Namespace) -> int:
        from rich.text import Text

        from traceviz.analyses.amp import amp_breakdown, amp_pairs
        from traceviz.analyses.compare import (
            kernel_diff,
            mpe_table,
            run_figures,
            workload_differences,
        )
        from traceviz.render.runs import amp_render, diff_table, mpe_render, runs_table

        if len(args.runs) < 2:
            raise UsageError("compare needs at least two runs")
        if args.plot:
            refuse_existing(chart_paths(args.plot, ["categories"]), args.force)
        runs = load_runs(args.runs)
        figs = [run_figures(t, label) for label, t in runs]
        out = stdout()
        out.print(runs_table(figs))
        differ = workload_differences(figs)
        if differ:
            out.print(Text.assemble(("note:", "yellow"), f" the runs differ in "
                                    f"{'; '.join(differ)}: their figures are not like for "
                                    "like"))
        for (la, ta), (lb, tb) in zip(runs, runs[1:], strict=False):
            out.print(diff_table(kernel_diff(ta, tb), la, lb, top=args.top))
        mpe = mpe_table(figs)
        if len(mpe) > 1:  # MPE needs two runs with timed batches
            out.print(mpe_render(mpe))
        pairs = [(a, b, amp_breakdown(a, b)) for a, b in amp_pairs(figs)]
        for a, b, br in pairs:
            out.print(amp_render(br, a.label, b.label))
        if args.plot:
            from traceviz.render.charts import amp_waterfall, category_bars

            charts = {"categories": category_bars(figs)}
            charts.update({f"amp_waterfall_{i}": amp_waterfall(br, a.label, b.label)
                           for i, (a, b, br) in enumerate(pairs, 1)})
            write_charts(args.plot, charts, args.force)
        return 0
