"""``traceviz report out.html``: one self-contained HTML file to explore, made with Bokeh
(every script inlined: it opens offline, from the file alone).

Per run: its top kernels (a sortable table with a filter, full names on hover), its
categories, efficiency and memory figures, a timeline of one step (device rows per
stream coloured by category, the host's launch calls above them, host-wait gaps marked;
zoom, pan, hover), its findings (``advise``) and scenarios (``whatif``); then the kernel
differences between consecutive runs, and the sections the Markdown report holds (runs
side by side, MPE, AMP breakdowns, sweeps); the step's timeline is ``step_timeline.py``'s.
What it shows is assembled before (``analyses/shown/html_runs.py``); this module draws it.
"""

from __future__ import annotations

import html
import json
from typing import Any

from traceviz.analyses.compare.runs import RunFigures
from traceviz.analyses.shown.html_runs import STEP_BUDGET, HtmlRun, HtmlRuns
from traceviz.render.report.kernel_tables import bokeh_module, categories, efficiency, kernels_table
from traceviz.render.report.report_section import Section, section_html
from traceviz.render.report.step_timeline import step_timeline
from traceviz.render.terminal.advice import profiled_note
from traceviz.units import fmt_ns, fmt_pct, fmt_rate

__all__ = ["STEP_BUDGET", "check_json", "html_report"]


def html_report(runs: HtmlRuns, sections: list[Section], title: str,
                lead: list[Section] | None = None) -> str:
    """The whole page. ``sections``: ``build_report``'s (runs side by side, MPE, AMP,
    sweeps), shown after the runs; ``lead``: before them (a job's ranks)."""
    file_html = bokeh_module("bokeh.embed").file_html
    column = bokeh_module("bokeh.layouts").column
    CustomJS = bokeh_module("bokeh.models").CustomJS
    Div = bokeh_module("bokeh.models").Div
    INLINE = bokeh_module("bokeh.resources").INLINE

    parts: list[Any] = [Div(text=f"<h1>{html.escape(title)}</h1>"), *(
        Div(text=section_html(s), sizing_mode="stretch_width") for s in lead or ())]
    checks = []
    for i, run in enumerate(runs.runs):
        run_parts, check = _run(i, run)
        parts += run_parts
        checks.append(check)
    if len(runs.runs) > 1:
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
    Document = bokeh_module("bokeh.document").Document

    doc = Document()
    doc.add_root(page)
    doc.js_on_event("document_ready", ready)
    return file_html(doc, resources=INLINE, title=title)


def _run(i: int, run: HtmlRun) -> tuple[list[Any], dict]:
    Div = bokeh_module("bokeh.models").Div

    label, s = run.label, run.figures.summary
    head = (f"<h2>{html.escape(label)}</h2>"
            f"<p>{html.escape(_run_line(run.figures))}</p>")
    parts: list[Any] = [Div(text=head, sizing_mode="stretch_width"), kernels_table(i, s),
                        categories(i, s)]
    if s.efficiency is not None and len(s.efficiency.groups):
        parts.append(efficiency(s))
    if s.memory is not None:
        from traceviz.render.terminal.efficiency import memory_render

        if (mem := memory_render(s.memory)) is not None:
            parts.append(Div(text=f"<p>{html.escape(_plain(mem))}</p>"))
    timeline, check = step_timeline(i, run, _streams_line(s))
    if timeline is not None:
        parts.append(timeline)
    from traceviz.render.report.range_tracks import ranges_parts

    parts += ranges_parts(i, label, s)
    parts.append(Div(text=_advice_html(run), sizing_mode="stretch_width"))
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


def _advice_html(run: HtmlRun) -> str:
    """The run's findings (``advise``) and scenarios (``whatif``)."""
    out = ["<h3>Findings (advise)</h3>"]
    advice, w = run.advice, run.whatif
    if advice is None or w is None:
        return f"<p>(no replay: {html.escape(run.replay_error)})</p>"
    findings, steps = advice.findings, advice.steps
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


def _differences(runs: HtmlRuns) -> Any:
    Div = bokeh_module("bokeh.models").Div

    from traceviz.render.terminal.runs_view import _calls
    from traceviz.table.names import distinct_names

    out = []
    for diff in runs.differences:
        la, lb, d = diff.a, diff.b, diff.table
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

