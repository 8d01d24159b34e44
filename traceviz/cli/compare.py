"""``traceviz compare``: runs side by side, kernel differences, MPE, AMP pairs."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from traceviz.cli.base import (
    Command,
    add_peak,
    chart_paths,
    json_text,
    load_runs,
    peak_of,
    refuse_existing,
    stdout,
    width_arg,
    write_charts,
)
from traceviz.errors import UsageError


class CompareCommand(Command):
    name = "compare"
    help = "compare runs side by side: timings, busy, launch-bound, categories, kernels, MPE"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("runs", type=Path, nargs="+",
                       help="run folders, trace.parquet files or raw traces (two or more)")
        p.add_argument("--label", action="append", metavar="NAME",
                       help="a run's name in tables and charts, one per run in order "
                            "(default: its folder's name)")
        p.add_argument("--top", type=int, default=12, help="kernel differences to list")
        p.add_argument("--plot", type=Path, metavar="DIR",
                       help="write categories.{png,svg} (and amp_waterfall for an AMP pair)")
        p.add_argument("--force", action="store_true", help="replace existing chart files")
        p.add_argument("--json", action="store_true",
                       help="print the runs, kernel differences, MPE and AMP breakdowns as "
                            "one JSON object")
        p.add_argument("--width", type=width_arg,
                       help="terminal width for the tables (at least 40 columns)")
        add_peak(p)

    def run(self, args: argparse.Namespace) -> int:
        from rich.text import Text

        from traceviz.analyses.compare.amp_breakdown import amp_breakdown, amp_pairs
        from traceviz.analyses.compare.range_diff import range_diff
        from traceviz.analyses.compare.runs import (
            kernel_diff,
            mpe_table,
            ordering_conflicts,
            run_figures,
            workload_differences,
        )
        from traceviz.analyses.summary.figures import integer_ns
        from traceviz.render.terminal.ranges_view import range_diff_table
        from traceviz.render.terminal.runs_view import (
            amp_render,
            diff_table,
            mpe_render,
            runs_table,
        )

        if len(args.runs) < 2:
            raise UsageError("compare needs at least two runs")
        if args.plot:
            refuse_existing(chart_paths(args.plot, ["categories"]), args.force)
        peak = peak_of(args)
        runs = load_runs(args.runs, args.label)
        figs = [run_figures(t, label, peak=peak) for label, t in runs]
        differ = workload_differences(figs)
        conflicts = ordering_conflicts(figs)
        diffs = [(la, lb, kernel_diff(ta, tb))
                 for (la, ta), (lb, tb) in zip(runs, runs[1:], strict=False)]
        range_diffs = [(la, lb, d) for (la, ta), (lb, tb) in zip(runs, runs[1:], strict=False)
                       if len(d := range_diff(ta, tb))]
        # exports of ranges alone have no kernel figures: their ranges are the comparison
        ranges_only = all(f.summary.ranges_only for f in figs)
        mpe = mpe_table(figs)
        pairs = [(a, b, amp_breakdown(a, b)) for a, b in amp_pairs(figs)]
        if args.json:
            out_dict = compare_dict(figs, differ, diffs, mpe, pairs, args.top)
            out_dict["profiled_vs_timed_order"] = conflicts
            out_dict["range_differences"] = [
                {"a": la, "b": lb, "ranges": integer_ns(
                    [{k: _finite(v) for k, v in r.items()}
                     for r in d.head(args.top).to_dict("records")])}
                for la, lb, d in range_diffs]
            print(json_text(out_dict, default=json_value))
        else:
            out = stdout(args.width)
            width = out.width
            if not ranges_only:
                out.print(runs_table(figs, width))
            if differ:
                out.print(Text.assemble(("note:", "yellow"), f" the runs differ in "
                                        f"{'; '.join(differ)}: their figures are not like "
                                        "for like"))
            for text in conflicts:
                out.print(Text.assemble(("note:", "yellow"), " profiled and timed orders "
                                        f"disagree: {text}"))
            if any(f.summary.timed is not None and not f.summary.timed.known for f in figs):
                out.print(Text.assemble(("note:", "yellow"), " a run without timed batches: "
                                        "its figures are profiled time only"))
            for la, lb, diff in diffs if not ranges_only else ():
                out.print(diff_table(diff, la, lb, top=args.top, width=width))
            for la, lb, d in range_diffs:
                out.print(range_diff_table(d, la, lb, args.top, width))
            if len(mpe) > 1:  # MPE needs two runs with timed batches
                from traceviz.analyses.compare.mpe import mpe_readings

                out.print(mpe_render(mpe, width, mpe_readings(figs, mpe)))
            for a, b, br in pairs:
                out.print(amp_render(br, a.label, b.label, width))
        if args.plot:
            from traceviz.render.charts import amp_waterfall, category_bars

            charts = {"categories": category_bars(figs)}
            charts.update({f"amp_waterfall_{i}": amp_waterfall(br, a.label, b.label)
                           for i, (a, b, br) in enumerate(pairs, 1)})
            write_charts(args.plot, charts, args.force)
        return 0


def json_value(x: object) -> object:
    """numpy scalars as Python numbers (``json.dumps``' default)."""
    return x.item() if hasattr(x, "item") else str(x)


def _finite(x: object) -> object:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def compare_dict(figs: list, differ: list[str], diffs: list, mpe: Any, pairs: list,
                 top: int) -> dict[str, Any]:
    """``compare --json``: every figure ``compare`` prints (the kernel differences: the
    ``--top`` biggest of each pair)."""
    from dataclasses import asdict

    from traceviz.analyses.compare.mpe import mpe_readings
    from traceviz.analyses.compare.runs import CHANGES

    return {
        "runs": [f.to_dict() for f in figs],
        "not_like_for_like": differ,
        "differences": [{
            "a": la, "b": lb, "unit": diff.attrs.get("unit"),
            "window_ns": diff.attrs.get("window_ns"),
            "total_ns": diff.attrs.get("total_ns"),
            "total_change": diff.attrs.get("total_change"),
            "windows_apart": diff.attrs.get("windows_apart"),
            "changes": {k: int(diff["change"].astype(str).str.contains(k, regex=False).sum())
                        for k in CHANGES},
            "kernels": [{k: _finite(v) for k, v in r.items()}
                        for r in diff.head(top).to_dict("records")]}
            for la, lb, diff in diffs],
        "mpe_percent": {str(r): {str(c): _finite(float(v)) for c, v in row.items()}
                        for r, row in mpe.iterrows()} if len(mpe) > 1 else {},
        "mpe_both_ways": [asdict(r) for r in mpe_readings(figs, mpe)] if len(mpe) > 1
        else [],
        "amp": [{"fp32": a.label, "amp": b.label, **br.to_dict()} for a, b, br in pairs],
    }
