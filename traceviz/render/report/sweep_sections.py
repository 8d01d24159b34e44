"""A sweep in a report: its points' table (times, rates, fractions as the terminal writes
them) and its plots (``charts.sweep_plots``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pandas as pd

from traceviz.render.escape import file_name
from traceviz.render.report.report_section import Section, figure_png
from traceviz.render.terminal.runs_view import sweep_on_cpu
from traceviz.units import flop_rate, fmt_bytes, fmt_ns, fmt_pct

COLUMNS = ("point", "status", "time_per_batch_s", "time_min_s", "time_max_s", "time_cv",
           "noisy", "cpu_threads", "sequences_per_s", "model_tflops", "mfu",
           "peak_memory_bytes", "idle_fraction", "launch_bound_fraction", "cast_share",
           "top_kernel", "error")


def sweep_section(label: str, df: pd.DataFrame) -> Section:
    """The sweep ``df`` (its sweep.parquet) titled by ``label``."""
    from traceviz.render.charts import sweep_plots

    table = df[[c for c in COLUMNS if c in df]].copy()
    # a sweep whose captured points are CPU traces: model GFLOP/s, framework overhead
    on_cpu = sweep_on_cpu(df)
    sweep_unit, sweep_scale = flop_rate(on_cpu)
    human: dict[str, Callable[[float], str]] = {
             "time_per_batch_s": lambda v: fmt_ns(v * 1e9),
             "time_min_s": lambda v: fmt_ns(v * 1e9),
             "time_max_s": lambda v: fmt_ns(v * 1e9), "time_cv": fmt_pct,
             "noisy": lambda v: "NOISY" if v else "",
             "sequences_per_s": lambda v: f"{v:,.1f}",
             "model_tflops": partial(_times, sweep_scale), "mfu": fmt_pct,
             "peak_memory_bytes": fmt_bytes,
             "idle_fraction": fmt_pct, "launch_bound_fraction": fmt_pct,
             "cast_share": fmt_pct}
    for c, fmt in human.items():
        if c in table:
            table[c] = table[c].map(lambda v, f=fmt: "–" if pd.isna(v) else f(v))
    table = table.rename(columns={"time_per_batch_s": "time/batch", "time_min_s": "min",
                                  "time_max_s": "max", "time_cv": "CV",
                                  "cpu_threads": "CPU threads",
                                  "sequences_per_s": "sequences/s",
                                  "model_tflops": f"model {sweep_unit}",
                                  "peak_memory_bytes": "peak memory",
                                  "idle_fraction": "framework overhead" if on_cpu
                                  else "idle (CPU: framework)",
                                  "launch_bound_fraction": "launch-bound",
                                  "cast_share": "cast share", "top_kernel": "top kernel"})
    images = [(f"{file_name(label)}_{name}.png", figure_png(fig))
              for name, fig in sweep_plots(df, label).items()]
    return Section(f"Sweep: {label}",
                   f"{(df['status'] == 'ok').sum()} of {len(df)} points captured.",
                   table, images)


def _times(scale: float, v: float) -> str:
    """A rate scaled to its unit (``units.flop_rate``), two decimals."""
    return f"{v * scale:,.2f}"
