"""The user ranges of a run in ``report.html``: the Ranges section's table (sortable) and
a track of every range per thread and nesting level (zoom, pan, hover). A run with more
than ``RANGE_BUDGET`` ranges draws its longest ones and says how many it leaves out."""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from traceviz.render.report.kernel_tables import bokeh_module, time_column, times
from traceviz.units import fmt_ns

RANGE_BUDGET = 5_000  # ranges drawn per run
RANGE_COLOR = "#6a3d9a"


def ranges_parts(i: int, label: str, summary: Any) -> list[Any]:
    """The table and the track (no ranges in the run: nothing)."""
    r = summary.ranges
    if not len(r):
        return []
    return [_table(i, r.table, r.has_device_work), _track(i, label, r.rows)]


def _table(i: int, t: Any, device: bool) -> Any:
    """Sortable; times as the terminal writes them, rows numbered from 1; the device
    columns (GPU projected, kernel time) only where a range launched device work."""
    models = bokeh_module("bokeh.models")
    NumberFormatter = models.NumberFormatter
    TableColumn = models.TableColumn
    figures = {k: times(t[c]) for k, c in (("total", "total_ns"), ("mean", "avg_ns"),
                                           ("median", "med_ns"), ("gpu", "proj_ns"),
                                           ("kernel", "kernel_ns"))}
    src = models.ColumnDataSource({
        "rank": list(range(1, len(t) + 1)),
        **{k: v["ns"] for k, v in figures.items()},
        **{f"{k}_text": v["text"] for k, v in figures.items()},
        "name": [(f"{p} → " if p else "") + str(n) for n, p in zip(t["name"], t["parent"],
                                                                  strict=True)],
        "style": t["style"].astype(str).tolist(), "count": t["instances"].tolist(),
        "share": (100 * t["share"]).round(2).tolist()})
    cols = [TableColumn(field="rank", title="#", width=40),
            TableColumn(field="name", title="range (parent → range)", width=420),
            TableColumn(field="style", title="style", width=70),
            TableColumn(field="count", title="count", width=60),
            time_column("total", "total", 90), time_column("mean", "mean", 80),
            time_column("median", "median", 80),
            TableColumn(field="share", title="share %",
                        formatter=NumberFormatter(format="0.00"), width=70)]
    if device:
        cols += [time_column("gpu", "GPU projected", 110),
                 time_column("kernel", "kernel time", 90)]
    return models.DataTable(source=src, columns=cols, sortable=True, reorderable=False,
                            index_position=None,
                            height=min(60 + 26 * len(t), 320), sizing_mode="stretch_width",
                            name=f"ranges-{i}")


def _track(i: int, label: str, rows: Any) -> Any:
    models = bokeh_module("bokeh.models")
    figure = bokeh_module("bokeh.plotting").figure
    shown = rows
    if len(rows) > RANGE_BUDGET:
        shown = rows.iloc[np.sort(np.argsort(-rows["dur_ns"].to_numpy(),
                                             kind="stable")[:RANGE_BUDGET])]
    track = [f"thread {t} · level {d}" for t, d in zip(shown["tid"], shown["depth"],
                                                        strict=True)]
    origin = int(rows["start_ns"].min())
    # µs, or ms where the ranges span 10 ms or more (as the step timeline picks)
    scale, unit = (1e6, "ms") if int(rows["end_ns"].max()) - origin >= 10_000_000 \
        else (1e3, "µs")
    src = models.ColumnDataSource(name=f"ranges-{i}-rows", data={
        "name": shown["name"].astype(str).tolist(), "y": track,
        "x0": ((shown["start_ns"] - origin) / scale).tolist(),
        "x1": ((shown["end_ns"] - origin) / scale).tolist(),
        "dur": [fmt_ns(d) for d in shown["dur_ns"]]})
    tracks = sorted(set(track))
    p = figure(y_range=tracks[::-1], height=80 + 26 * len(tracks),
               sizing_mode="stretch_width",
               title=f"{label}: user ranges, {unit} from the first; drag to pan, wheel to "
                     "zoom",
               tools="xpan,xwheel_zoom,box_zoom,reset,save", active_scroll="xwheel_zoom",
               name=f"ranges-track-{i}")
    p.hbar(y="y", left="x0", right="x1", height=0.8, color=RANGE_COLOR, source=src)
    p.add_tools(models.HoverTool(renderers=p.renderers[-1:],
                                 tooltips=[("range", "@name"), ("duration", "@dur")]))
    note = "" if len(shown) == len(rows) else \
        f"{len(shown):,} longest of {len(rows):,} ranges drawn"
    column = bokeh_module("bokeh.layouts").column
    return column(p, models.Div(text=f"<p><i>{html.escape(note)}</i></p>" if note else ""),
                  sizing_mode="stretch_width")
