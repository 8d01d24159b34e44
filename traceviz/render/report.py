"""Runs and sweeps written up like the reproduced studies' reports (Markdown or HTML).

``build_report`` turns figures already computed (``RunFigures`` with their ``Summary``,
sweep tables) into sections (text, a table, charts); ``to_markdown`` keeps the charts
as PNG files beside the .md; ``section_html`` embeds them in the HTML report
(``report_html.py``).
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from urllib.parse import quote

import pandas as pd

from traceviz.analyses.compare.amp import amp_breakdown, amp_pairs
from traceviz.analyses.compare.runs import (
    RunFigures,
    mpe_table,
    shape_text,
    workload_differences,
)
from traceviz.render.escape import file_name, markdown
from traceviz.render.terminal.runs import (
    MPE_TITLE,
    amp_rows,
    amp_verdict,
    mpe_note,
    sweep_on_cpu,
)
from traceviz.units import flop_rate, fmt_bytes, fmt_ns, fmt_pct

NONE = "–"  # a cell without a figure; a column (a table) of nothing else is left out


@dataclass
class Section:
    title: str
    text: str = ""
    table: pd.DataFrame | None = None
    images: list[tuple[str, bytes]] = field(default_factory=list)  # (file name, PNG)


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _loss_section(figs: list[RunFigures]) -> Section | None:
    """The runs' loss of every timed batch (bench.json), one line per run, a panel per
    shape; None where no run recorded losses."""
    from traceviz.render.loss_curves import loss_curves

    rows = [{"series": f.label, **{k: (f.meta.get("workload") or {}).get(k)
                                   for k in ("batch", "hidden", "seq")},
             "loss_per_batch": (f.meta.get("bench") or {}).get("loss_per_batch"),
             "loss_first_batch": (f.meta.get("bench") or {}).get("loss_first_batch")}
            for f in figs]
    fig = loss_curves(pd.DataFrame(rows), "runs")
    if fig is None:
        return None
    section = Section("Loss curves", "The loss of every timed batch, against the batch "
                      "number from the first warm-up batch: equivalent variants on the same "
                      "data and seed draw the same curve.")
    section.images.append(("loss_curves.png", _png(fig)))
    return section


def _timed_section(figs: list[RunFigures]) -> Section:
    """Profiled against timed step, the host's time by cause, and the streams' overlap."""
    from traceviz.analyses.compare.runs import ordering_conflicts

    rows = []
    cpu = all(f.cpu_trace for f in figs)
    for f in figs:
        s, per = f.summary, f.per_step
        t = s.timed
        main = s.host.main if s.host is not None else None
        most = max(s.stream_overlap, key=lambda o: o.streams, default=None)
        k = s.host_per_kernel_ns
        rows.append({
            "run": f.label,
            "profiled step": "–" if t is None else fmt_ns(t.profiled_ns),
            "timed step": "–" if t is None or t.timed_ns is None else fmt_ns(t.timed_ns),
            "profiler overhead": "–" if t is None or t.overhead is None else t.overhead_text,
            f"step per {'CPU op' if cpu else 'kernel'} (timed)": "–" if k["timed"] is None
            else fmt_ns(k["timed"]),
            "host: API calls/step": "–" if main is None else fmt_ns(main["api_ns"] / per),
            "framework ops/step": "–" if main is None else fmt_ns(main["op_ns"] / per),
            "between ops/step": "–" if main is None else fmt_ns(main["between_ns"] / per),
            "streams": "–" if most is None else str(most.streams),
            "2+ streams busy/step": "–" if most is None or most.streams < 2 else
            f"{fmt_ns(most.multi_ns / per)} ({fmt_pct(most.overlap_fraction)} of busy)",
        })
    text = ("The time a user pays is the timed step (no profiler); the trace's figures are "
            "profiled, slowed on the host by the profiler.")
    if not cpu:  # CPU runs have no launching thread or streams: those columns are empty
        text += (
            " Host time of the thread that launched the most work, by cause: runtime API "
            "calls, framework ops' own time, and the time between ops (Python, or on a "
            "TensorFlow/JAX runtime thread the framework's executor; anything "
            "unrecorded). Streams: time with two or more busy at once; 0 means their "
            "work never overlapped.")
    conflicts = ordering_conflicts(figs)
    if conflicts:
        text += " Profiled and timed orders disagree: " + "; ".join(conflicts) + "."
    return Section("Profiled and timed step" if cpu else
                   "Profiled and timed step, host time, streams", text, pd.DataFrame(rows))


def _largest_wait(f: RunFigures) -> str:
    """The host wait's largest cause and its time per step ("–" where not split)."""
    from traceviz.render.terminal.host import WAIT_LABELS

    w = f.summary.host_wait_split if not f.cpu_trace and f.summary.inputs is not None \
        else None
    if w is None or not any(w.causes.values()):
        return "–"
    cause, ns = max(w.causes.items(), key=lambda kv: kv[1])
    return f"{WAIT_LABELS.get(cause, cause)} {fmt_ns(ns / f.per_step)}"


def _elapsed(bench: dict) -> str:
    """The timed phase's wall time and batches, each where recorded ("–" without)."""
    elapsed, batches = bench.get("elapsed_s"), bench.get("batches")
    if elapsed is None:
        return "–"
    return f"{elapsed:.3f} s" + ("" if batches is None else f" ({batches} batches)")


def build_report(figs: list[RunFigures], sweeps: list[tuple[str, pd.DataFrame]]
                 ) -> list[Section]:
    """Sections for runs (their figures) and sweeps (label, sweep table)."""
    from traceviz.render.charts import (
        amp_waterfall,
        blank_charts,
        category_bars,
        kernel_pie,
        sweep_plots,
    )

    sections: list[Section] = []
    cpu = bool(figs) and all(f.cpu_trace for f in figs)  # CPU words, no device columns
    unit, scale = flop_rate(cpu)
    work = "CPU ops" if cpu else "kernels"
    if figs:
        env = pd.DataFrame([{
            "run": f.label,
            "framework": f"{(f.meta.get('runner') or {}).get('framework', '?')} "
                         f"{(f.meta.get('runner') or {}).get('framework_version', '')}".strip(),
            "device": (f.meta.get("runner") or {}).get("device_name")
            or ", ".join((f.meta.get("devices") or {}).values()) or "?",
            "source": f.meta.get("source_format", "?"),
        } for f in figs])
        differ = workload_differences(figs)
        sections.append(Section("Environment", "The runs differ in " + "; ".join(differ)
                                + ": their figures are not like for like." if differ else "",
                                table=env))
        rows = []
        for f in figs:
            w = f.meta.get("workload") or {}
            bench = f.meta.get("bench") or {}
            tm = f.timings
            rows.append({
                "run": f.label, "model": f.meta.get("model", "–"),
                "preset": f.meta.get("preset", "–"), "mode": w.get("mode", "–"),
                "amp": f.meta.get("amp") or "none",
                "shape": shape_text(w),
                "time/batch": "–" if not tm else fmt_ns(tm.median_s * 1e9),
                "min - max": "–" if not tm else f"{fmt_ns(tm.min_s * 1e9)} - "
                                                f"{fmt_ns(tm.max_s * 1e9)}",
                "CV": "–" if not tm else fmt_pct(tm.cv) + (" NOISY" if tm.noisy else ""),
                "warm-up": "–" if not tm or tm.warmup_batches is None else
                str(tm.warmup_batches) + (" (not settled)" if tm.warmup_settled is False
                                          else ""),
                "first call": "–" if not tm or tm.first_call_s is None or not
                tm.warmup_batches else f"{tm.first_call_s:.3f} s"
                + ("" if tm.compile_s is None else f" (compile {tm.compile_s:.3f} s)"),
                "profiler overhead": "–" if not tm or tm.profiler_overhead is None else
                tm.overhead_text,
                "elapsed": _elapsed(bench),
                "sequences/s": "–" if f.sequences_per_s is None else
                f"{f.sequences_per_s:,.1f}",
                "time/sample": "–" if f.time_per_sample_s is None else
                fmt_ns(f.time_per_sample_s * 1e9),
                f"model {unit}": "–" if f.model_tflops is None else
                f"{f.model_tflops * scale:,.2f}",
                "MFU": "–" if f.mfu is None else f"{fmt_pct(f.mfu)} of {f.mfu_key}",
                "peak memory": "–" if f.peak_memory_bytes is None else
                f"{fmt_bytes(f.peak_memory_bytes)} {f.peak_memory_what}",
            })
        sections.append(Section(
            "Time per batch, elapsed and sequences/s",
            "Benchmark phase without the profiler (median of the timed batches"
            + ("" if cpu else ", device synchronised") + "). NOISY: the timed batches "
            "spread by CV > 10% or max/min > 1.5. "
            "Profiler overhead: the steady profiled step (the profiler's start-up step "
            "left out) over the timed median, shown only where it lies outside the "
            "unprofiled batches' range.", pd.DataFrame(rows)))
        phase_rows = [{
            "run": f.label, "phase": r.phase,
            "wall/step": fmt_ns(r.wall_ns / f.per_step) if r.wall_ns else "–",
            "busy/step": fmt_ns(r.busy_ns / f.per_step),
            f"{work}/step": f"{r.kernels / f.per_step:,.0f}",
            "casts/step": f"{r.casts / f.per_step:,.0f}",
            "cast time/step": fmt_ns(r.cast_ns / f.per_step),
        } for f in figs for r in f.summary.phases.itertuples(index=False)]
        if phase_rows:
            sections.append(Section(
                "Phases", "Per marked phase (data, forward, backward, optimizer); "
                + ("a CPU op belongs to the phase it starts in." if cpu else "device work "
                   "belongs to the phase its launch was made in."), pd.DataFrame(phase_rows)))
        bound = pd.DataFrame([{
            "run": f.label, "trace": "CPU" if f.cpu_trace else "GPU, no kernel records"
            if f.summary.kernel_activity_missing else "GPU",
            "bound by": f.summary.bound.title if f.summary.inputs is not None else "–",
            "host wait, largest cause": _largest_wait(f),
            "busy/step": fmt_ns(f.busy_ns / f.per_step),
            "span/step": fmt_ns(f.span_ns / f.per_step),
            "framework overhead" if cpu else "idle (CPU: framework overhead)":
            fmt_pct(f.idle_fraction),
            "launch-bound (waiting for host)": fmt_pct(f.launch_bound_fraction),
            "queued idle/step": "–" if f.queued_idle_ns is None
            else fmt_ns(f.queued_idle_ns / f.per_step),
            "cast time/step": fmt_ns(f.cast_ns / f.per_step),
            "tensor-core share (TF32/half/bf16/fp8)": fmt_pct(f.tensor_core_share),
        } for f in figs])
        sections.append(Section(
            "What bounds the step and framework overhead" if cpu else
            "What bounds the step, idle and launch-bound fractions",
            "Bound by: the verdict advise opens with (the input pipeline, framework "
            "overhead on the host threads, or the CPU ops' own work). Per step window: "
            "framework overhead = 1 - busy / span, busy being the time the CPU ops run."
            if cpu else
            "Bound by: the verdict advise opens with (start-up, the input pipeline, "
            "communication, the host and what it was doing, or the device's own work). "
            "Per step window: idle = 1 - busy / span; launch-bound = the share of the span "
            "in which the device was idle with nothing launched pending (waiting for the "
            "host), whose largest cause is named; queued idle = idle while launched work "
            "waited.", bound))
        sections.append(_timed_section(figs))
        pies = Section("Where the time goes", "Top CPU ops (the host threads' leaf "
                       "framework ops) and others." if cpu else "Top kernels (CPU ops on a "
                       "CPU trace) and others.")
        for f in figs:
            blank = blank_charts(f.summary).get("kernels_pie")
            if blank:  # no slice to draw: a line says why instead of an empty pie
                pies.text += f" {f.label}: no pie, {blank}."
                continue
            pies.images.append((f"pie_{file_name(f.label)}.png",
                                _png(kernel_pie(f.summary, f.label))))
        if len(figs) > 1:
            pies.images.append(("categories.png", _png(category_bars(figs))))
        sections.append(pies)
        losses = _loss_section(figs)
        if losses is not None:
            sections.append(losses)
        if len(mpe_table(figs)) > 1:
            mpe = mpe_table(figs).map(lambda v: "–" if pd.isna(v) else f"{v:+.1f}%")
            from traceviz.analyses.compare.mpe import mpe_readings

            notes = "".join(f" {mpe_note(r)}." for r in mpe_readings(figs, mpe_table(figs)))
            sections.append(Section("Mean percentage error", MPE_TITLE + "." + notes,
                                    mpe.reset_index(names="run")))
        for a, b in amp_pairs(figs):
            br = amp_breakdown(a, b)
            sections.append(Section(
                f"AMP breakdown: {a.label} → {b.label}", amp_verdict(br),
                pd.DataFrame(amp_rows(br), columns=["part", "time per step"]),
                [(f"amp_{file_name(b.label)}.png", _png(amp_waterfall(br, a.label, b.label)))]))
    for label, df in sweeps:
        cols = [c for c in ("point", "status", "time_per_batch_s", "time_min_s", "time_max_s",
                            "time_cv", "noisy", "cpu_threads", "sequences_per_s",
                            "model_tflops", "mfu", "peak_memory_bytes",
                            "idle_fraction", "launch_bound_fraction", "cast_share",
                            "top_kernel", "error") if c in df]
        table = df[cols].copy()
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
        images = [(f"{file_name(label)}_{name}.png", _png(fig))
                  for name, fig in sweep_plots(df, label).items()]
        sections.append(Section(f"Sweep: {label}",
                                f"{(df['status'] == 'ok').sum()} of {len(df)} points captured.",
                                table, images))
    return sections


def shown_table(df: pd.DataFrame | None) -> pd.DataFrame | None:
    """``df`` as a report shows it: columns (after the first, the key) holding nothing but
    "–" left out, and no table at all where no figure is left (None)."""
    if df is None or df.empty:
        return None
    keep = [c for i, c in enumerate(df.columns)
            if i == 0 or not df[c].map(lambda v: isinstance(v, str) and v == NONE).all()]
    return df[keep] if len(keep) > 1 else None


def md_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of ``df``'s columns (not its index)."""
    cols = [markdown(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(markdown(v) for v in row) + " |")
    return "\n".join(lines)


def to_markdown(sections: list[Section], title: str, image_dir: str) -> tuple[str, dict]:
    """The Markdown text and ``{relative path: PNG bytes}`` to write beside it. Every
    text is escaped (``escape.markdown``): titles, texts and cells hold names from traces."""
    out, files = [f"# {markdown(title)}", ""], {}
    for s in sections:
        out += [f"## {markdown(s.title)}", ""]
        if s.text:
            out += [markdown(s.text), ""]
        if (table := shown_table(s.table)) is not None:
            out += [md_table(table), ""]
        for name, png in s.images:
            rel = f"{image_dir}/{name}"
            files[rel] = png
            out += [f"![{markdown(name)}]({quote(rel)})", ""]
    return "\n".join(out), files


def section_html(s: Section) -> str:
    """A section as HTML: its tables inline, its charts as embedded PNG (the explorable
    report, ``report_html.py``, shows the sections the Markdown report holds this way)."""
    body = [f"<h2>{html.escape(s.title)}</h2>"]
    if s.text:
        body.append(f"<p>{html.escape(s.text)}</p>")
    if (table := shown_table(s.table)) is not None:
        body.append(table.to_html(index=False, escape=True, border=0))
    for name, png in s.images:
        data = base64.b64encode(png).decode()
        # at most its own size (a PNG's pixels at 110 dpi), never stretched to the page
        body.append(f'<img alt="{html.escape(name)}" style="max-width:min(100%, '
                    f'{_png_width(png)}px)" src="data:image/png;base64,{data}">')
    return "".join(body)


def _times(scale: float, v: float) -> str:
    """A rate scaled to its unit (``units.flop_rate``), two decimals."""
    return f"{v * scale:,.2f}"


def _png_width(png: bytes) -> int:
    """A PNG's width in pixels (its IHDR chunk)."""
    return int.from_bytes(png[16:20], "big") if png[:8] == b"\x89PNG\r\n\x1a\n" else 800
