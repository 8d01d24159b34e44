"""``traceviz analyze``: the summary of one trace, as tables, JSON, charts or exports."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceviz.cli.base import (
    Command,
    add_peak,
    chart_paths,
    json_text,
    load_with_progress,
    memory_limit_arg,
    peak_of,
    progress_bar,
    read_ahead,
    refuse_existing,
    said,
    stderr,
    stdout,
    width_arg,
    write_charts,
)
from traceviz.errors import UsageError
from traceviz.files.fileio import atomic_output, staged_files
from traceviz.table.exports import EXPORTS as TABLES

if TYPE_CHECKING:
    from traceviz.analyses.critical_path.path import CriticalPath
    from traceviz.analyses.summary.figures import Summary
    from traceviz.opcost.peaks import Peak
    from traceviz.trace import Trace

# the files --export writes: analyses/summary/tables.py's export_tables builds them
EXPORTS = tuple(TABLES)


class AnalyzeCommand(Command):
    name = "analyze"
    help = "summarize a trace: top kernels, categories, launch overhead, casts"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("trace", type=Path,
                       help="a traceviz .parquet, any raw trace, a capture's run folder, a "
                            "folder of rank traces, or a rank dataset (traceviz import DIR)")
        p.add_argument("--top", type=int, default=15,
                       help="kernels to list (default 15); over 32 ranks (steps) of a rank "
                            "folder, also the slowest ranks (the widest steps) to list")
        p.add_argument("--wide", action="store_true", help="full kernel names, no shortening")
        p.add_argument("--by", choices=("name", "config"), default="name",
                       help="kernel table rows: per name (default), or per name and launch "
                            "configuration (grid, block, registers, shared memory) where the "
                            "trace records it")
        p.add_argument("--json", action="store_true",
                       help="print the figures as one JSON object instead of tables")
        p.add_argument("--plot", type=Path, metavar="DIR",
                       help="write the kernels_pie, launch_overhead, roofline and memory charts "
                            "(PNG, SVG) to DIR; a chart with nothing to draw is not "
                            "written, and a line says why")
        p.add_argument("--export", type=Path, metavar="DIR",
                       help=f"write {', '.join(n + '.parquet' for n in EXPORTS)} to DIR")
        p.add_argument("--force", action="store_true",
                       help="replace existing files in --plot/--export folders")
        p.add_argument("--width", type=width_arg,
                       help="terminal width for the tables (at least 40 columns)")
        add_peak(p)
        p.add_argument("--perfetto", type=Path, metavar="OUT.json",
                       help="write the trace for ui.perfetto.dev / chrome://tracing, with "
                            "step windows, idle intervals by cause, categories, casts, "
                            "launch arrows and queue depth as tracks (any input format)")
        p.add_argument("--critical-path", nargs="?", const="", metavar="RANGE",
                       help="what bounds each step: the chain of host calls, launches, "
                            "device work and waits its length is made of (with RANGE: of "
                            "each host range named RANGE..., e.g. forward)")
        p.add_argument("--raw-range-names", action="store_true",
                       help="an nsys export's PyTorch emit_nvtx ranges by their whole text "
                            "(\"aten::mm, seq = 4, op_id = 7\"), each a range of its own, "
                            "instead of grouped by op")
        p.add_argument("--memory-limit", metavar="SIZE", type=memory_limit_arg,
                       help="DuckDB's memory limit for a rank dataset (e.g. 2GB; default a "
                            "quarter of this machine's memory)")

    def run(self, args: argparse.Namespace) -> int:
        if args.top < 1:
            raise UsageError("must be at least 1", option="top")
        read_ahead(args.trace)
        from traceviz.analyses import summarize
        from traceviz.cli.apart import compute_apart
        from traceviz.files.folders import is_dataset, is_rank_folder

        if is_dataset(args.trace) or is_rank_folder(args.trace):
            return self.run_ranks(args)
        exports = plots = []
        if args.export:
            exports = [args.export / f"{n}.parquet" for n in EXPORTS]
        if args.plot:
            from traceviz.render.charts import SUMMARY_CHARTS

            plots = chart_paths(args.plot, SUMMARY_CHARTS)
        perfetto = [args.perfetto] if args.perfetto else []
        refuse_existing([*exports, *plots, *perfetto], args.force)

        with ExitStack() as stack:
            if args.raw_range_names:
                from traceviz.parsers.nvtx_text import raw_range_names

                stack.enter_context(raw_range_names())
            if not (args.export or args.perfetto or args.plot
                    or args.critical_path is not None):
                from traceviz.parsers.nsys.apart import ranges_apart

                # only figures are asked for: an export of NVTX ranges alone is read
                # into the Ranges section's few columns, not into rows
                stack.enter_context(ranges_apart())
            # every row: the host split reads every runtime call and op
            trace = load_with_progress(args.trace, stack)
        peak = peak_of(args)
        summary = summarize(trace, by_config=args.by == "config", with_efficiency=True,
                            peak=peak)
        # the costliest sections on a second core while this process does the others
        apart = compute_apart(summary)
        try:
            return self._report(args, trace, summary, peak)
        finally:
            if apart is not None:  # a failure before they were read: not wanted
                apart.stop()

    def _report(self, args: argparse.Namespace, trace: Trace, summary: Summary,
                peak: Peak | None) -> int:
        path = None
        if args.critical_path is not None:
            from traceviz.analyses.critical_path.path import critical_path

            path = critical_path(trace, args.critical_path or None)
        if args.json:
            out = summary.to_dict(top=args.top)
            if path is not None:
                out["critical_path"] = path.to_dict(top=args.top)
            print(json_text(out))
        else:
            from traceviz.render.terminal.summary import print_summary

            console = stdout(args.width)
            print_summary(console, summary, top=args.top, wide=args.wide)
            if path is not None:
                from traceviz.render.terminal.critical_path import critical_path_render

                console.print(critical_path_render(path, top=args.top, width=console.width))
        said(self.write_outputs(args, trace, summary, path, peak))
        return 0

    @staticmethod
    def write_outputs(args: argparse.Namespace, trace: Trace, summary: Summary,
                      path: CriticalPath | None, peak: Peak | None) -> list[str]:
        """``--export``, ``--perfetto`` and ``--plot``: what was written, one line each."""
        written: list[str] = []
        with ExitStack() as outputs:  # a failed --plot also takes back the --export folder
            if args.export:
                from traceviz.analyses.summary.tables import export_tables

                # the tables go in together at the end: a failure keeps an old export whole
                stage = outputs.enter_context(staged_files(args.export, args.force))
                for name, table in export_tables(trace, peak).items():
                    # not ``path``: that is the critical path --perfetto draws below
                    with atomic_output(stage / f"{name}.parquet") as tmp:
                        table.to_parquet(tmp, index=False)
                    written.append(f"wrote {args.export / name}.parquet ({len(table):,} rows)")
            if args.perfetto:
                from traceviz.analyses.shown.perfetto_tracks import perfetto_tracks
                from traceviz.render.perfetto import perfetto_json

                with atomic_output(args.perfetto, force=args.force) as tmp:
                    windows = summary.inputs.windows if summary.inputs is not None else None
                    tmp.write_text(perfetto_json(trace, perfetto_tracks(trace, path, windows)))
                written.append(f"wrote {args.perfetto} (open it in https://ui.perfetto.dev)")
            if args.plot:
                from traceviz.cli.base import run_label
                from traceviz.render.charts import summary_charts

                charts = summary_charts(summary, run_label(args.trace, trace))
                if charts.figures:  # no folder made for no chart
                    write_charts(args.plot, charts.figures, args.force)
                written += [f"{stem} chart not written: {why}"
                            for stem, why in charts.not_drawn.items()]
        return written

    def run_ranks(self, args: argparse.Namespace) -> int:
        """A folder of rank traces, or the dataset ``traceviz import DIR`` made of one."""
        from rich.progress import MofNCompleteColumn, TimeElapsedColumn

        from traceviz.files.folders import is_dataset
        from traceviz.rankset.dataset import analyze_dataset
        from traceviz.rankset.folder import analyze_folder

        if args.plot or args.export or args.perfetto:
            raise UsageError("--plot, --export and --perfetto take one trace; for many ranks, "
                             "`traceviz import DIR -o DATASET` writes them as Parquet")
        with progress_bar(stderr(), MofNCompleteColumn(), TimeElapsedColumn(),
                          description="ranks") as bar:
            task = bar.add_task("ranks", total=None)
            tick = lambda done, total: bar.update(task, completed=done, total=total)  # noqa: E731
            if is_dataset(args.trace):
                summary = analyze_dataset(args.trace, args.memory_limit, tick)
            else:
                summary = analyze_folder(args.trace, tick)
        path = self._slowest_path(args, summary) if args.critical_path is not None else None
        if args.json:
            out = summary.to_dict(top=args.top)
            if path is not None:
                out["critical_path"] = path.to_dict(top=args.top)
            print(json_text(out))
        else:
            from traceviz.render.terminal.summary import ranks_render

            console = stdout(args.width)
            console.print(ranks_render(summary, top=args.top, width=console.width))
            if path is not None:
                from traceviz.render.terminal.critical_path import ranks_path_render

                console.print(ranks_path_render(path, top=args.top, width=console.width))
        return 0

    @staticmethod
    def _slowest_path(args: argparse.Namespace, summary: Any) -> Any:
        """The slowest rank's critical path and the ranks its collectives waited for."""
        from rich.progress import MofNCompleteColumn, TimeElapsedColumn

        from traceviz.analyses.compare.ranks import slowest_ranks
        from traceviz.rankset.slowest_path import ranks_path

        slowest = slowest_ranks(summary.ranks, 1)[0].rank
        with progress_bar(stderr(), MofNCompleteColumn(), TimeElapsedColumn(),
                          description="critical path: ranks read") as bar:
            task = bar.add_task("ranks", total=len(summary.ranks))
            return ranks_path(args.trace, [(r.rank, r.file) for r in summary.ranks], slowest,
                              args.critical_path or None,
                              lambda done, total: bar.update(task, completed=done))
