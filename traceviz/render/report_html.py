"""``traceviz report out.html``: one self-contained HTML file to explore, made with Bokeh
(every script inlined: it opens offline, from the file alone).

Per run: its top kernels (a sortable table with a filter, full names on hover), its
categories, efficiency and memory figures, a timeline of one step (device rows per
stream coloured by category, the host's launch calls above them, host-wait gaps marked;
zoom, pan, hover), its findings (``advise``) and scenarios (``whatif``); then the kernel
differences between consecutive runs, and the sections the Markdown report holds (runs
side by side, MPE, AMP breakdowns, sweeps). A step holding more than ``STEP_BUDGET``
device rows shows its longest ones and says how many it leaves out.
"""

from __future__ import annotations

import html
import json
from typing import Any

from traceviz.analyses.compare.runs import RunFigures
from traceviz.render.html_tables import NAME_CHARS, PALETTE, categories, efficiency, kernels_table
from traceviz.render.report import Section, section_html
from traceviz.trace import Trace
from traceviz.units import fmt_ns, fmt_pct, fmt_rate

STEP_BUDGET = 3_000       # device rows drawn per step (and as many launch calls)
PATH_TRACK = "critical path (device rows)"


def _bokeh(module: str) -> Any:
    """A Bokeh module as ``Any``: its models are made at run time, and its type stubs do
    not list them (mypy would reject ``bokeh.models.Div``)."""
    import importlib

    return importlib.import_module(module)


def html_report(runs: list[tuple[str, Trace, RunFigures]], sections: list[Section],
                title: str, lead: list[Section] | None = None) -> str:
    """The whole page. ``sections``: ``build_report``'s (runs side by side, MPE, AMP,
    sweeps), shown after the runs; ``lead``: before them (a job's ranks)."""
    file_html = _bokeh("bokeh.embed").file_html
    column = _bokeh("bokeh.layouts").column
    CustomJS = _bokeh("bokeh.models").CustomJS
    Div = _bokeh("bokeh.models").Div
    INLINE = _bokeh("bokeh.resources").INLINE

    parts: list[Any] = [Div(text=f"<h1>{html.escape(title)}</h1>"), *(
        Div(text=section_html(s), sizing_mode="stretch_width") for s in lead or ())]
    checks = []
    for i, (label, trace, fig) in enumerate(runs):
        run_parts, check = _run(i, label, trace, fig)
        parts += run_parts
        checks.append(check)
    if len(runs) > 1:
        parts.append(_differences(runs))
    for s in sections:
        parts.append(Div(text=section_html(s), sizing_mode="stretch_width"))
    page = column(*parts, sizing_mode="stretch_width")
    # glue: what the page drew, for a reader's script (and the tests) to check
    ready = CustomJS(args={"checks": checks}, code="""
const out = [];
for (const c of checks) {
  const src = Bokeh.documents[0].get_model_by_name(c.source);
  out.push({run: c.run, kernel_bars: src ? src.data["name"].length : 0,
            kernels_in_step: c.kernels_in_step, tooltip: c.tooltip,
            first_name: src && src.data["name"].length ? src.data["name"][0] : null});
}
const el = document.createElement("pre");
el.id = "traceviz-check"; el.style.display = "none";
el.textContent = JSON.stringify(out);
document.body.appendChild(el);
""")
    Document = _bokeh("bokeh.document").Document

    doc = Document()
    doc.add_root(page)
    doc.js_on_event("document_ready", ready)
    return file_html(doc, resources=INLINE, title=title)


def _run(i: int, label: str, trace: Trace, fig: RunFigures) -> tuple[list[Any], dict]:
    Div = _bokeh("bokeh.models").Div

    s = fig.summary
    head = (f"<h2>{html.escape(label)}</h2><p>{html.escape(_run_line(fig))}</p>")
    parts: list[Any] = [Div(text=head, sizing_mode="stretch_width"), kernels_table(i, s),
                        categories(i, s)]
    if s.efficiency is not None and len(s.efficiency.groups):
        parts.append(efficiency(s))
    if s.memory is not None:
        from traceviz.render.terminal.efficiency import memory_render

        if (mem := memory_render(s.memory)) is not None:
            parts.append(Div(text=f"<p>{html.escape(_plain(mem))}</p>"))
    timeline, check = _timeline(i, label, trace, _streams_line(s))
    if timeline is not None:
        parts.append(timeline)
    from traceviz.render.report_ranges import ranges_parts

    parts += ranges_parts(i, label, s)
    parts.append(Div(text=_advice_html(trace), sizing_mode="stretch_width"))
    return parts, check


def _run_line(f: RunFigures) -> str:
    t = f.timings
    bits = []
    if f.time_per_batch_s is not None:
        bits.append(f"{fmt_ns(f.time_per_batch_s * 1e9)} per batch")
        if t is not None:
            bits.append(f"min {fmt_ns(t.min_s * 1e9)}, max {fmt_ns(t.max_s * 1e9)}, "
                        f"CV {100 * t.cv:.1f}%" + (" NOISY" if t.noisy else ""))
    per = f.per_step
    bits.append(f"busy {fmt_ns(f.busy_ns / per)} of {fmt_ns(f.span_ns / per)} per profiled "
                "step")
    from traceviz.analyses.timed import profiled_note

    bits.append(profiled_note(f.summary.timed))
    if f.launch_bound_fraction is not None:
        bits.append(f"launch-bound {fmt_pct(f.launch_bound_fraction)}")
    if f.model_tflops is not None:
        bits.append(f"model {fmt_rate(f.model_tflops, f.cpu_trace)}")
    if f.peak_memory_bytes is not None:
        from traceviz.units import fmt_bytes

        bits.append(f"peak memory {fmt_bytes(f.peak_memory_bytes)} {f.peak_memory_what}")
    return "; ".join(bits)


def _plain(renderable: Any) -> str:
    """A rich renderable as plain text (the terminal's memory lines)."""
    import io

    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text().strip()


def _streams_line(s: Any) -> str:
    """Whether the run's streams overlap (those that ran kernels), for the caption."""
    per = max(s.steps, 1)
    return " ".join(
        f"Device {o.device}: {o.streams} streams ran work, {fmt_ns(o.multi_ns / per)} per "
        f"step with two or more busy ({fmt_pct(o.overlap_fraction)} of busy time)"
        + ((f": {'they' if o.kernel_streams == o.streams else 'those with kernels'} "
            + ("never" if not o.kernel_multi_ns else "barely") + " overlap.")
           if o.never_overlaps else ".")
        + (f" {o.streams - o.kernel_streams} held copies alone (not judged)."
           if o.kernel_streams < o.streams else "")
        for o in s.stream_overlap if o.streams >= 2)


def _timeline(i: int, label: str, trace: Trace, streams: str = "") -> tuple[Any, dict]:
    """One step (the one of median length) of the run: device rows per stream lane,
    launch calls on a host row, host-wait gaps on a row of their own; a CPU trace: its
    CPU ops per host thread. Times in µs from the step's start, in ms from 10 ms."""
    ColumnDataSource = _bokeh("bokeh.models").ColumnDataSource
    Div = _bokeh("bokeh.models").Div
    HoverTool = _bokeh("bokeh.models").HoverTool
    figure = _bokeh("bokeh.plotting").figure

    from traceviz.analyses.timeline import step_rows

    tl = step_rows(trace, STEP_BUDGET)
    check = {"run": label, "source": f"timeline-{i}-rows", "kernels_in_step": tl.rows_in_step,
             "tooltip": "@name"}
    if tl.rows.empty:
        return Div(text="<p>(no CPU ops in the step: no timeline)</p>" if tl.cpu else
                   "<p>(no device rows: no timeline)</p>"), check
    r = tl.rows
    on_path = _on_critical_path(trace, r["row"].to_numpy())
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
    p.xaxis.formatter = _bokeh("bokeh.models").NumeralTickFormatter(format="0.[0]")
    p.xaxis.axis_label = f"{unit} from the step's start"
    p.add_tools(HoverTool(renderers=p.renderers[-1:], tooltips=[
        ("name", "@name"), ("duration", "@dur"), ("category", "@category"),
        ("input shapes", "@shapes"), ("on the critical path", "@path")] if tl.cpu else [
        ("name", "@name"), ("duration", "@dur"), ("category", "@category"), ("op", "@op"),
        ("op's input shapes", "@shapes"), ("launch configuration", "@config"),
        ("launch delay", "@delay"),
        ("on the critical path", "@path")]))
    if on_path.any():  # the same rows again, on a track of their own: no second copy
        value = _bokeh("bokeh.core.properties").value
        BooleanFilter = _bokeh("bokeh.models").BooleanFilter
        CDSView = _bokeh("bokeh.models").CDSView

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
    column = _bokeh("bokeh.layouts").column

    return column(p, Div(text=f"<p><i>{html.escape(note.strip())}</i></p>" if note else ""),
                  sizing_mode="stretch_width"), check


def _on_critical_path(trace: Trace, rows: Any) -> Any:
    """bool per row: on the step's critical path (outlined in the timeline)."""
    import numpy as np

    from traceviz.analyses.critical_path.path import critical_path
    from traceviz.errors import TraceVizError

    try:
        return np.isin(rows, critical_path(trace).rows)
    except TraceVizError:
        return np.zeros(len(rows), bool)


def _advice_html(trace: Trace) -> str:
    from traceviz.analyses.advice.engine import advise_full
    from traceviz.analyses.whatif.engine import whatif
    from traceviz.errors import TraceVizError

    out = ["<h3>Findings (advise)</h3>"]
    try:
        advice = advise_full(trace)
        findings, steps = advice.findings, advice.steps
        w = whatif(trace)
    except TraceVizError as e:
        return f"<p>(no replay: {html.escape(e.message)})</p>"
    out.append(f"<p><b>What bounds the step: {html.escape(advice.bound.title)}</b> "
               f"({html.escape(advice.bound.why)})</p>")
    per = max(steps, 1)
    if not findings:
        out.append("<p>No rule fired on this trace.</p>")
    for f in findings:
        saving = "" if f.saving_ns is None else \
            f" <b>est. saving {fmt_ns(f.timed_saving_ns_per_step)} per timed step</b> " \
            f"({fmt_ns(f.saving_ns / per)} profiled; {f.saving_scenario})" \
            if f.timed_saving_ns_per_step is not None else \
            f" <b>est. saving {fmt_ns(f.saving_ns / per)} per profiled step</b> " \
            f"({f.saving_scenario})"
        out.append(f"<p><b>{html.escape(f.title)}</b>{saving}<br>"
                   + "<br>".join(html.escape(e) for e in f.evidence)
                   + f"<br>&rarr; {html.escape(f.action)}</p>")
    out.append("<h3>Scenarios (whatif, saving per step against the replay)</h3><table>"
               "<tr><th>scenario</th><th>predicted</th><th>saving</th><th>assumptions</th></tr>")
    for s in w.scenarios:
        if not s.applies or s.predicted_ns is None or s.saving_ns is None:
            out.append(f"<tr><td>{html.escape(s.name)}</td><td>-</td><td>-</td>"
                       f"<td>does not apply: {html.escape(s.reason)}</td></tr>")
            continue
        out.append(f"<tr><td>{html.escape(s.name)}</td><td>{fmt_ns(s.predicted_ns / per)}</td>"
                   f"<td>{fmt_ns(s.saving_ns / per)} ({fmt_pct(s.saving_fraction)})</td><td>"
                   + "<br>".join(html.escape(a) for a in s.assumptions) + "</td></tr>")
    return "".join(out) + "</table>"


def _differences(runs: list[tuple[str, Trace, RunFigures]]) -> Any:
    Div = _bokeh("bokeh.models").Div

    from traceviz.analyses.compare.runs import kernel_diff
    from traceviz.render.terminal.runs import _calls
    from traceviz.table.names import distinct_names

    out = []
    for (la, ta, _), (lb, tb, _) in zip(runs, runs[1:], strict=False):
        d = kernel_diff(ta, tb).head(15)
        shown = distinct_names(list(d["name"].astype(str)), 80)
        rows = "".join(
            f"<tr><td title='{html.escape(str(r.name))}'>{html.escape(name)}</td>"
            f"<td>{html.escape(str(r.change))}</td><td>{_calls(r.count_a)}</td>"
            f"<td>{_calls(r.count_b)}</td><td>{'+' if r.delta_ns > 0 else ''}"
            f"{fmt_ns(r.delta_ns)}</td></tr>"
            for r, name in zip(d.itertuples(index=False), shown, strict=True))
        out.append(f"<h3>Kernel differences: {html.escape(la)} → {html.escape(lb)}</h3>"
                   "<table><tr><th>kernel</th><th>change</th><th>calls A</th><th>calls B</th>"
                   f"<th>time B − A</th></tr>{rows}</table>")
    return Div(text="".join(out), sizing_mode="stretch_width")


def check_json(page: str) -> list[dict] | None:
    """What the page wrote into ``#traceviz-check`` (from a browser's dumped DOM)."""
    start = page.find('id="traceviz-check"')
    if start < 0:
        return None
    text = page[page.index(">", start) + 1:page.index("</pre>", start)]
    return json.loads(html.unescape(text))

