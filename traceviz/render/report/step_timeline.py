"""A run's step in ``report.html``: one step (the one of median length) drawn with Bokeh,
its device rows per stream lane coloured by category, the host's launch calls above them,
host-wait gaps marked, the rows on the critical path again on a track of their own (zoom,
pan, hover). A step holding more than ``STEP_BUDGET`` device rows shows its longest ones
and says how many it leaves out (``analyses/shown/html_runs.py`` picks them)."""

from __future__ import annotations

import html
from typing import Any

from traceviz.analyses.shown.html_runs import HtmlRun
from traceviz.render.report.kernel_tables import NAME_CHARS, PALETTE, bokeh_module
from traceviz.units import fmt_ns

PATH_TRACK = "critical path (device rows)"


def step_timeline(i: int, run: HtmlRun, streams: str = "") -> tuple[Any, dict]:
    """One step (the one of median length) of the run: device rows per stream lane,
    launch calls on a host row, host-wait gaps on a row of their own; a CPU trace: its
    CPU ops per host thread. Times in µs from the step's start, in ms from 10 ms."""
    ColumnDataSource = bokeh_module("bokeh.models").ColumnDataSource
    Div = bokeh_module("bokeh.models").Div
    HoverTool = bokeh_module("bokeh.models").HoverTool
    figure = bokeh_module("bokeh.plotting").figure

    label, tl = run.label, run.timeline
    check = {"run": label, "source": f"timeline-{i}-rows", "kernels_in_step": tl.rows_in_step,
             "tooltip": "@name"}
    if tl.rows.empty:
        return Div(text="<p>(no CPU ops in the step: no timeline)</p>" if tl.cpu else
                   "<p>(no device rows: no timeline)</p>"), check
    r = tl.rows
    on_path = run.on_path
    path_track = "critical path (CPU ops)" if tl.cpu else PATH_TRACK
    tracks = (["host: launch calls"] if len(tl.launches) else []) \
        + list(dict.fromkeys(r["track"])) + list(dict.fromkeys(tl.waits["track"])) \
        + ([path_track] if on_path.any() else [])
    scale, unit = (1e6, "ms") if tl.end_ns - tl.start_ns >= 10_000_000 else (1e3, "µs")
    src = ColumnDataSource(name=f"timeline-{i}-rows", data={
        "name": [str(n)[:NAME_CHARS] for n in r["name"]], "y": r["track"].tolist(),
        "x0": (r["start_ns"] / scale).tolist(), "x1": (r["end_ns"] / scale).tolist(),
        "dur": [fmt_ns(d) for d in r["end_ns"] - r["start_ns"]],
        "category": r["category"].tolist(), "op": r["op"].tolist(),
        "config": r["details"].tolist(), "shapes": r["shapes"].tolist(),
        "delay": r["delay"].tolist(),
        "color": [PALETTE.get(c, "#7f7f7f") for c in r["category"]],
        "path": ["yes" if x else "no" for x in on_path]})
    p = figure(y_range=tracks[::-1], height=80 + 26 * len(tracks), sizing_mode="stretch_width",
               title=f"{label}: step {tl.step} ({fmt_ns(tl.end_ns - tl.start_ns)})"
                     + (", the host threads' CPU ops" if tl.cpu else "")
                     + f", {unit} from its start; drag to pan, wheel to zoom",
               tools="xpan,xwheel_zoom,box_zoom,reset,save", active_scroll="xwheel_zoom",
               name=f"timeline-{i}")
    p.hbar(y="y", left="x0", right="x1", height=0.8, color="color", source=src)
    p.xaxis.formatter = bokeh_module("bokeh.models").NumeralTickFormatter(format="0.[0]")
    p.xaxis.axis_label = f"{unit} from the step's start"
    p.add_tools(HoverTool(renderers=p.renderers[-1:], tooltips=[
        ("name", "@name"), ("duration", "@dur"), ("category", "@category"),
        ("input shapes", "@shapes"), ("on the critical path", "@path")] if tl.cpu else [
        ("name", "@name"), ("duration", "@dur"), ("category", "@category"), ("op", "@op"),
        ("op's input shapes", "@shapes"), ("launch configuration", "@config"),
        ("launch delay", "@delay"),
        ("on the critical path", "@path")]))
    if on_path.any():  # the same rows again, on a track of their own: no second copy
        value = bokeh_module("bokeh.core.properties").value
        BooleanFilter = bokeh_module("bokeh.models").BooleanFilter
        CDSView = bokeh_module("bokeh.models").CDSView

        p.hbar(y=value(path_track), left="x0", right="x1", height=0.8, color="#000000",
               source=src, view=CDSView(filter=BooleanFilter([bool(x) for x in on_path])))
    if len(tl.launches):
        ls = ColumnDataSource({"name": tl.launches["name"].tolist(),
                               "y": ["host: launch calls"] * len(tl.launches),
                               "x0": (tl.launches["start_ns"] / scale).tolist(),
                               "x1": (tl.launches["end_ns"] / scale).tolist()})
        p.hbar(y="y", left="x0", right="x1", height=0.8, color=PALETTE["launch"], source=ls)
    if len(tl.waits):
        ws = ColumnDataSource({"y": tl.waits["track"].tolist(),
                               "x0": (tl.waits["start_ns"] / scale).tolist(),
                               "x1": (tl.waits["end_ns"] / scale).tolist()})
        p.hbar(y="y", left="x0", right="x1", height=0.8, color=PALETTE["host wait"], source=ws)
    note = f" {tl.note}" if tl.note else ""
    note += f" {streams}" if streams else ""
    column = bokeh_module("bokeh.layouts").column

    return column(p, Div(text=f"<p><i>{html.escape(note.strip())}</i></p>" if note else ""),
                  sizing_mode="stretch_width"), check
