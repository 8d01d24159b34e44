"""The user ranges of a run in ``report.html``: the Ranges section's table (sortable) and
a track of every range per thread and nesting level (zoom, pan, hover). A run with more
than ``RANGE_BUDGET`` ranges draws its longest ones and says how many it leaves out."""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from traceviz.units import fmt_ns

RANGE_BUDGET = 5_000  # ranges drawn per run
RANGE_COLOR = "#6a3d9a"


def _bokeh(module: str) -> Any:
    import importlib

    return importlib.import_module(module)


def ranges_parts(i: int, label: str, summary: Any) -> list[Any]:
    """The table and the track (no ranges in the run: nothing)."""
    r = summary.ranges
    if not len(r):
        return []
    return [_table(i, r.table), _track(i, label, r.rows)]


def _table(i: int, t: Any) -> Any:
    models = _bokeh("bokeh.models")
    NumberFormatter = models.NumberFormatter
    TableColumn = models.TableColumn
    src = models.ColumnDataSource({
        "name": [(f"{p} → " if p else "") + str(n) for n, p in zip(t["name"], t["parent"],
                                                                  strict=True)],
        "style": t["style"].astype(str).tolist(), "count": t["instances"].tolist(),
        "total_us": (t["total_ns"] / 1e3).round(1).tolist(),
        "mean_us": (t["avg_ns"] / 1e3).round(2).tolist(),
        "median_us": (t["med_ns"] / 1e3).round(2).tolist(),
        "share": (100 * t["share"]).round(2).tolist(),
        "gpu_us": (t["proj_ns"] / 1e3).round(1).tolist(),
        "kernel_us": (t["kernel_ns"] / 1e3).round(1).tolist()})
    us = NumberFormatter(format="0,0.0")
    cols = [TableColumn(field="name", title="range (parent → range)", width=420),
            TableColumn(field="style", title="style", width=70),
            TableColumn(field="count", title="count", width=60),
            TableColumn(field="total_us", title="total µs", formatter=us, width=90),
            TableColumn(field="mean_us", title="mean µs", formatter=us, width=80),
            TableColumn(field="median_us", title="median µs", formatter=us, width=80),
            TableColumn(field="share", title="share %",
                        formatter=NumberFormatter(format="0.00"), width=70),
            TableColumn(field="gpu_us", title="GPU projected µs", formatter=us, width=110),
            TableColumn(field="kernel_us", title="kernel µs", formatter=us, width=90)]
    return models.DataTable(source=src, columns=cols, sortable=True, reorderable=False,
                            height=min(60 + 26 * len(t), 320), sizing_mode="stretch_width",
                            name=f"ranges-{i}")


def _track(i: int, label: str, rows: Any) -> Any:
    models = _bokeh("bokeh.models")
    figure = _bokeh("bokeh.plotting").figure
    shown = rows
    if len(rows) > RANGE_BUDGET:
        shown = rows.iloc[np.sort(np.argsort(-rows["dur_ns"].to_numpy(),
                                             kind="stable")[:RANGE_BUDGET])]
    track = [f"thread {t} · level {d}" for t, d in zip(shown["tid"], shown["depth"],
                                                        strict=True)]
    origin = int(rows["start_ns"].min())
    src = models.ColumnDataSource(name=f"ranges-{i}-rows", data={
        "name": shown["name"].astype(str).tolist(), "y": track,
        "x0": ((shown["start_ns"] - origin) / 1e3).tolist(),
        "x1": ((shown["end_ns"] - origin) / 1e3).tolist(),
        "dur": [fmt_ns(d) for d in shown["dur_ns"]]})
    tracks = sorted(set(track))
    p = figure(y_range=tracks[::-1], height=80 + 26 * len(tracks),
               sizing_mode="stretch_width",
               title=f"{label}: user ranges, µs from the first; drag to pan, wheel to zoom",
               tools="xpan,xwheel_zoom,box_zoom,reset,save", active_scroll="xwheel_zoom",
               name=f"ranges-track-{i}")
    p.hbar(y="y", left="x0", right="x1", height=0.8, color=RANGE_COLOR, source=src)
    p.add_tools(models.HoverTool(renderers=p.renderers[-1:],
                                 tooltips=[("range", "@name"), ("duration", "@dur")]))
    note = "" if len(shown) == len(rows) else \
        f"{len(shown):,} longest of {len(rows):,} ranges drawn"
    column = _bokeh("bokeh.layouts").column
    return column(p, models.Div(text=f"<p><i>{html.escape(note)}</i></p>" if note else ""),
                  sizing_mode="stretch_width")
