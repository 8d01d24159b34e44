"""Runs and sweeps written up like the reproduced studies' reports (Markdown or HTML).

``build_report`` turns a report's figures, already assembled (``ReportData``: the runs'
``RunFigures`` with their ``Summary``, what compares them, the sweep tables), into
sections (text, a table, charts); ``report_section.py`` writes them as Markdown or HTML.
"""

from __future__ import annotations

import pandas as pd

from traceviz.analyses.compare.amp_breakdown import AmpBreakdown
from traceviz.analyses.compare.runs import RunFigures
from traceviz.analyses.shown.report_data import ReportData
from traceviz.render.escape import file_name
from traceviz.render.report.report_section import Section, figure_png
from traceviz.render.report.sweep_sections import sweep_section
from traceviz.render.terminal.runs_view import MPE_TITLE, amp_rows, amp_verdict, mpe_note
from traceviz.units import flop_rate, fmt_bytes, fmt_ns, fmt_pct


def build_report(data: ReportData) -> list[Section]:
    """Sections for the runs (their figures side by side) and the sweeps."""
    sections: list[Section] = []
    figs = data.runs
    if figs:
        cpu = all(f.cpu_trace for f in figs)  # CPU words, no device columns
        sections += [_environment(data), _batches(data, cpu)]
        if (phases := _phases(figs, cpu)) is not None:
            sections.append(phases)
        sections += [_bound(figs, cpu), _timed_section(figs, data.ordering_conflicts),
                     _pies(figs, cpu)]
        if (losses := _loss_section(figs)) is not None:
            sections.append(losses)
        if data.mpe is not None:
            mpe = data.mpe.map(lambda v: "–" if pd.isna(v) else f"{v:+.1f}%")
            notes = "".join(f" {mpe_note(r)}." for r in data.mpe_readings)
            sections.append(Section("Mean percentage error", MPE_TITLE + "." + notes,
                                    mpe.reset_index(names="run")))
        sections += [_amp(p.fp32, p.amp, p.breakdown) for p in data.amp]
    return sections + [sweep_section(label, df) for label, df in data.sweeps]


def _environment(data: ReportData) -> Section:
    """The runs' framework, device and source format; the workloads' differences."""
    env = pd.DataFrame([{
        "run": f.label,
        "framework": f"{(f.meta.get('runner') or {}).get('framework', '?')} "
                     f"{(f.meta.get('runner') or {}).get('framework_version', '')}".strip(),
        "device": (f.meta.get("runner") or {}).get("device_name")
        or ", ".join((f.meta.get("devices") or {}).values()) or "?",
        "source": f.meta.get("source_format", "?"),
    } for f in data.runs])
    differ = data.workload_differences
    return Section("Environment", "The runs differ in " + "; ".join(differ)
                   + ": their figures are not like for like." if differ else "", table=env)


def _batches(data: ReportData, cpu: bool) -> Section:
    """The benchmark phase's time per batch, its spread, throughput, MFU and memory."""
    rows = [_batch_row(f, shape, cpu) for f, shape in zip(data.runs, data.shapes, strict=True)]
    return Section(
        "Time per batch, elapsed and sequences/s",
        "Benchmark phase without the profiler (median of the timed batches"
        + ("" if cpu else ", device synchronised") + "). NOISY: the timed batches "
        "spread by CV > 10% or max/min > 1.5. "
        "Profiler overhead: the steady profiled step (the profiler's start-up step "
        "left out) over the timed median, shown only where it lies outside the "
        "unprofiled batches' range.", pd.DataFrame(rows))


def _batch_row(f: RunFigures, shape: str, cpu: bool) -> dict[str, str]:
    unit, scale = flop_rate(cpu)
    w = f.meta.get("workload") or {}
    tm = f.timings
    return {
        "run": f.label, "model": f.meta.get("model", "–"),
        "preset": f.meta.get("preset", "–"), "mode": w.get("mode", "–"),
        "amp": f.meta.get("amp") or "none",
        "shape": shape,
        "time/batch": "–" if not tm else fmt_ns(tm.median_s * 1e9),
        "min - max": "–" if not tm else f"{fmt_ns(tm.min_s * 1e9)} - "
                                        f"{fmt_ns(tm.max_s * 1e9)}",
        "CV": "–" if not tm else fmt_pct(tm.cv) + (" NOISY" if tm.noisy else ""),
        "warm-up": "–" if not tm or tm.warmup_batches is None else
        str(tm.warmup_batches) + (" (not settled)" if tm.warmup_settled is False else ""),
        "first call": "–" if not tm or tm.first_call_s is None or not
        tm.warmup_batches else f"{tm.first_call_s:.3f} s"
        + ("" if tm.compile_s is None else f" (compile {tm.compile_s:.3f} s)"),
        "profiler overhead": "–" if not tm or tm.profiler_overhead is None else
        tm.overhead_text,
        "elapsed": _elapsed(f.meta.get("bench") or {}),
        "sequences/s": "–" if f.sequences_per_s is None else f"{f.sequences_per_s:,.1f}",
        "time/sample": "–" if f.time_per_sample_s is None else
        fmt_ns(f.time_per_sample_s * 1e9),
        f"model {unit}": "–" if f.model_tflops is None else f"{f.model_tflops * scale:,.2f}",
        "MFU": "–" if f.mfu is None else f"{fmt_pct(f.mfu)} of {f.mfu_key}",
        "peak memory": "–" if f.peak_memory_bytes is None else
        f"{fmt_bytes(f.peak_memory_bytes)} {f.peak_memory_what}",
    }


def _phases(figs: list[RunFigures], cpu: bool) -> Section | None:
    """Per marked phase and run: wall and busy time, work and casts per step."""
    work = "CPU ops" if cpu else "kernels"
    rows = [{
        "run": f.label, "phase": r.phase,
        "wall/step": fmt_ns(r.wall_ns / f.per_step) if r.wall_ns else "–",
        "busy/step": fmt_ns(r.busy_ns / f.per_step),
        f"{work}/step": f"{r.kernels / f.per_step:,.0f}",
        "casts/step": f"{r.casts / f.per_step:,.0f}",
        "cast time/step": fmt_ns(r.cast_ns / f.per_step),
    } for f in figs for r in f.summary.phases.itertuples(index=False)]
    if not rows:
        return None
    return Section("Phases", "Per marked phase (data, forward, backward, optimizer); "
                   + ("a CPU op belongs to the phase it starts in." if cpu else "device work "
                      "belongs to the phase its launch was made in."), pd.DataFrame(rows))


def _bound(figs: list[RunFigures], cpu: bool) -> Section:
    """What bounds each run's step, its idle and launch-bound fractions."""
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
    return Section(
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
        "waited.", bound)


def _pies(figs: list[RunFigures], cpu: bool) -> Section:
    """Each run's top kernels (CPU ops) as a pie; the runs' categories side by side."""
    from traceviz.render.charts import blank_charts, category_bars, kernel_pie

    pies = Section("Where the time goes", "Top CPU ops (the host threads' leaf "
                   "framework ops) and others." if cpu else "Top kernels (CPU ops on a "
                   "CPU trace) and others.")
    for f in figs:
        blank = blank_charts(f.summary).get("kernels_pie")
        if blank:  # no slice to draw: a line says why instead of an empty pie
            pies.text += f" {f.label}: no pie, {blank}."
            continue
        pies.images.append((f"pie_{file_name(f.label)}.png",
                            figure_png(kernel_pie(f.summary, f.label))))
    if len(figs) > 1:
        pies.images.append(("categories.png", figure_png(category_bars(figs))))
    return pies


def _amp(a: RunFigures, b: RunFigures, br: AmpBreakdown) -> Section:
    """Where an AMP run's step time went against its full-precision twin."""
    from traceviz.render.charts import amp_waterfall

    return Section(
        f"AMP breakdown: {a.label} → {b.label}", amp_verdict(br),
        pd.DataFrame(amp_rows(br), columns=["part", "time per step"]),
        [(f"amp_{file_name(b.label)}.png", figure_png(amp_waterfall(br, a.label, b.label)))])


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
    section.images.append(("loss_curves.png", figure_png(fig)))
    return section


def _timed_section(figs: list[RunFigures], conflicts: list[str]) -> Section:
    """Profiled against timed step, the host's time by cause, and the streams' overlap;
    ``conflicts``: where profiled and timed orders of the runs disagree."""
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
    if conflicts:
        text += " Profiled and timed orders disagree: " + "; ".join(conflicts) + "."
    return Section("Profiled and timed step" if cpu else
                   "Profiled and timed step, host time, streams", text, pd.DataFrame(rows))


def _largest_wait(f: RunFigures) -> str:
    """The host wait's largest cause and its time per step ("–" where not split)."""
    from traceviz.render.terminal.host_view import WAIT_LABELS

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
