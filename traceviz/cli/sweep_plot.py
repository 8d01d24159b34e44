"""``traceviz sweep-plot``: time per batch against batch size and timesteps."""

from __future__ import annotations

import argparse
from pathlib import Path

from traceviz.cli.base import Command, chart_paths, refuse_existing, write_charts
from traceviz.errors import InputError


class SweepPlotCommand(Command):
    name = "sweep-plot"
    help = ("plot a sweep: time per batch vs batch size and vs timesteps per variant, "
            "model TFLOP/s vs batch size, and the loss of every timed batch")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("sweep", type=Path, help="a sweep.parquet (or its folder)")
        p.add_argument("--out", type=Path, metavar="DIR",
                       help="where to write the charts (default: DIR/plots beside the sweep)")
        p.add_argument("--force", action="store_true", help="replace existing chart files")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.capture.grid import SWEEP_FILE, load_sweep
        from traceviz.files.fileio import check_readable
        from traceviz.render.charts import sweep_plots

        path = args.sweep / SWEEP_FILE if args.sweep.is_dir() else args.sweep
        check_readable(path)
        df = load_sweep(path)
        if "status" not in df or not (df["status"] == "ok").any():
            raise InputError(f"{path}: no captured points to plot")
        figs = sweep_plots(df, path.parent.name or path.stem)
        if not figs:
            raise InputError(f"{path}: the sweep varies neither batch nor timesteps and "
                             "recorded no losses")
        out = args.out or path.parent / "plots"
        refuse_existing(chart_paths(out, list(figs)), args.force)
        write_charts(out, figs, args.force)
        return 0
