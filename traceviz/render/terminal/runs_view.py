"""Rich renderings of ``compare`` and ``amp``: runs side by side, kernel differences,
mean percentage error, the AMP breakdown."""

from __future__ import annotations

import pandas as pd
from rich.console import Group, RenderableType
from rich.text import Text

from traceviz.analyses.compare.amp_breakdown import AmpBreakdown
from traceviz.analyses.compare.mpe import MpeBothWays
from traceviz.analyses.compare.runs import RunFigures
from traceviz.analyses.timings import Timings
from traceviz.render.terminal.fit import Col, fitted_groups, fitted_table, left_note
from traceviz.table.schema import CATEGORIES
from traceviz.units import flop_rate, fmt_bytes, fmt_ns, fmt_pct


def _model_row(runs: list[RunFigures]) -> list[tuple[str, list[str]]]:
    """What each run ran (its variant or script), where a column's label (its folder or
    ``--label``) does not already say it."""
    models = [str(r.meta.get("model") or "–") for r in runs]
    if all(m == "–" or m == r.label for m, r in zip(models, runs, strict=True)):
        return []
    return [("model", models)]


def _secs(x: float | None) -> str:
    return "–" if x is None else f"{x:.4f} s"


def runs_table(runs: list[RunFigures], width: int = 120) -> Group:
    """The runs side by side: one column per run, as many tables as ``width`` needs (no
    run's column leaves, no figure is cut)."""
    per = ("per profiled step" if all(r.steps for r in runs) else
           "per profiled step; a run without steps: its whole window")
    cpu = all(r.cpu_trace for r in runs)  # CPU runs only: CPU words, no device rows
    busy = "busy (CPU ops)" if cpu else "busy (GPU; CPU: CPU ops)"
    unit, scale = flop_rate(cpu)
    work = "CPU ops" if cpu else "kernels"
    rows = _model_row(runs) + [
        ("time per batch (median)", [_secs(r.time_per_batch_s) for r in runs]),
        ("  min - max", [_range(r.timings) for r in runs]),
        ("  spread (CV)", [_cv(r.timings) for r in runs]),
        ("  profiler overhead", [_overhead(r.timings) for r in runs]),
        ("  warm-up batches", [_warmup(r.timings) for r in runs]),
        ("  first call (warm-up over median)", [_first(r.timings) for r in runs]),
        ("sequences/s", ["–" if r.sequences_per_s is None else f"{r.sequences_per_s:,.1f}"
                         for r in runs]),
        ("  time per sample (median / batch)",
         ["–" if r.time_per_sample_s is None else fmt_ns(r.time_per_sample_s * 1e9)
          for r in runs]),
        (f"model {unit} (workload FLOPs / median)",
         ["–" if r.model_tflops is None else f"{r.model_tflops * scale:,.2f}" for r in runs]),
        ("  MFU (of the run's peak)", [_mfu(r) for r in runs]),
        ("peak memory (timed batches)", [_memory(r) for r in runs]),
        ("CPU % (timed batches)", [_usage(r, "cpu_percent", "{:.0f}%") for r in runs]),
        ("  GPU utilization", [_usage(r, "gpu_util_percent", "{:.0f}%") for r in runs]),
        ("  energy per batch", [_usage(r, "energy_per_batch_j", "{:.3g} J") for r in runs]),
        (busy, [fmt_ns(r.busy_ns / r.per_step) for r in runs]),
        ("span", [fmt_ns(r.span_ns / r.per_step) for r in runs]),
        ("framework overhead, 1 - busy/span" if cpu else
         "idle, 1 - busy/span (CPU: framework)", [fmt_pct(r.idle_fraction) for r in runs]),
        ("  waiting for host (launch-bound)",
         [fmt_pct(r.launch_bound_fraction) for r in runs]),
        ("  work queued", [fmt_ns(None if r.queued_idle_ns is None
                                  else r.queued_idle_ns / r.per_step) for r in runs]),
        ("CPU ops" if cpu else "kernels (CPU ops on CPU)",
         [f"{r.kernel_count / r.per_step:,.0f}" for r in runs]),
    ]
    rows += [(f"  {c}", [fmt_ns(r.category_ns[c] / r.per_step) for r in runs])
             for c in CATEGORIES if any(r.category_ns[c] for r in runs)]
    rows += [
        ("cast time", [fmt_ns(r.cast_ns / r.per_step) for r in runs]),
        ("tensor-core share (TF32/half/bf16/fp8)",
         [fmt_pct(r.tensor_core_share) for r in runs]),
        (f"step per {work[:-1]}, timed", [_per_kernel(r, "timed") for r in runs]),
        ("  profiled", [_per_kernel(r, "profiled") for r in runs]),
        ("host: API calls", [_host(r, "api_ns") for r in runs]),
        ("  framework ops", [_host(r, "op_ns") for r in runs]),
        (f"  between ops ({_between(runs)}, unrecorded)",
         [_host(r, "between_ns") for r in runs]),
        ("streams with work", [_streams(r, False) for r in runs]),
        ("  2+ streams busy (share of busy)", [_streams(r, True) for r in runs]),
    ]
    phases = [p for p in ("data", "forward", "backward", "optimizer", "(no phase)")
              if any((r.summary.phases["phase"] == p).any() for r in runs)]
    for p in phases:
        for what in ("wall", "busy", "kernels"):
            rows.append((f"phase {p}: {what}" if what == "wall" else
                         f"  {work if what == 'kernels' else what}",
                         [_phase_cell(r.summary.phases, p, what, r.per_step) for r in runs]))
    shown = [[name, *values] for name, values in rows
             # a timing detail no run has; CPU runs: any row none has (the device's)
             if not ((cpu or name.startswith("  ")) and all(v == "–" for v in values))]
    parts: list[RenderableType] = list(fitted_groups(
        f"Runs side by side ({'CPU op' if cpu else 'device'} times {per})",
        Col("metric", "left", wrap=True),
        # a long label wraps, figures stay whole
        [Col(r.label) for r in runs], shown, width))
    if any(r.timings and r.timings.noisy for r in runs):
        parts.append(Text("NOISY: a run whose timed batches spread by CV > 10% or max/min > "
                          "1.5; its median may not repeat", style="dim"))
    return Group(*parts)


def _per_kernel(r: RunFigures, which: str) -> str:
    v = r.summary.host_per_kernel_ns[which]
    return "–" if v is None else fmt_ns(v)


def _between(runs: list[RunFigures]) -> str:
    """What the runs' launching threads ran between ops: one name where they agree."""
    what = {r.summary.host.between_what for r in runs if r.summary.host is not None}
    return what.pop() if len(what) == 1 else "Python or the framework's executor"


def _host(r: RunFigures, key: str) -> str:
    main = r.summary.host.main if r.summary.host is not None else None
    return "–" if main is None else fmt_ns(main[key] / r.per_step)


def _streams(r: RunFigures, overlap: bool) -> str:
    most = max(r.summary.stream_overlap, key=lambda o: o.streams, default=None)
    if most is None:
        return "–"
    if not overlap:
        return f"{most.streams}"
    return "–" if most.streams < 2 else \
        f"{fmt_ns(most.multi_ns / r.per_step)} ({fmt_pct(most.overlap_fraction)})"


def _mfu(r: RunFigures) -> str:
    return "–" if r.mfu is None else f"{fmt_pct(r.mfu)} of {r.mfu_key}"


def _memory(r: RunFigures) -> str:
    return "–" if r.peak_memory_bytes is None else \
        f"{fmt_bytes(r.peak_memory_bytes)} {r.peak_memory_what}"


def _phase_cell(phases: pd.DataFrame, phase: str, what: str, per: int) -> str:
    row = phases[phases["phase"] == phase]
    if row.empty:
        return "–"
    r = row.iloc[0]
    if what == "kernels":
        return f"{r['kernels'] / per:,.0f}"
    value = r[f"{what}_ns"]
    return fmt_ns(value / per) if value or what == "busy" else "–"


def _range(t: Timings | None) -> str:
    return "–" if t is None else f"{t.min_s:.4f} - {t.max_s:.4f} s"


def _cv(t: Timings | None) -> str:
    return "–" if t is None else f"{100 * t.cv:.1f}%" + (" NOISY" if t.noisy else "")


def _overhead(t: Timings | None) -> str:
    if t is None or t.profiler_overhead is None:
        return "–"
    return t.overhead_text


def _usage(r: RunFigures, key: str, form: str) -> str:
    value = (r.utilization or {}).get(key)
    return "–" if value is None else form.format(value)


def _first(t: Timings | None) -> str:
    if t is None or t.first_call_s is None or not t.warmup_batches:
        return "–"
    return f"{t.first_call_s:.3f} s" + ("" if t.compile_s is None else
                                        f" (compile {t.compile_s:.3f} s)")


def _warmup(t: Timings | None) -> str:
    if t is None or t.warmup_batches is None:
        return "–"
    return f"{t.warmup_batches}" + (" (not settled)" if t.warmup_settled is False else "")



def diff_table(diff: pd.DataFrame, a: str, b: str, top: int = 12,
               width: int = 120) -> Group:
    """Kernel differences: calls and time per call apart, so that a window holding fewer
    calls is not read as faster kernels; the change in time stays at any width. The
    call columns say their unit (per step, or per second of each run's window, whose
    lengths the title gives); the caption holds the totals the rows add up to."""
    step = diff.attrs.get("unit") == "step"
    windows = diff.attrs.get("window_ns") or []
    if step:
        per, unit = "per step", "/step"
    else:
        per = "per second of each run's window" + (
            f": A {fmt_ns(windows[0])}, B {fmt_ns(windows[1])}" if len(windows) == 2 else "")
        unit = "/s"
    what = "CPU op" if diff.attrs.get("cpu") else "kernel"
    cols = (Col(what, "left", name=True), Col("category", "left", drop=1),
            Col("change", "left", wrap=True), Col(f"calls{unit}\nA", drop=4),
            Col(f"calls{unit}\nB", drop=5), Col("mean/call\nA", drop=2),
            Col("mean/call\nB", drop=3), Col(f"time{unit}\nB − A"))
    rows = [[str(r.name), str(r.category), str(r.change), _calls(r.count_a),
             _calls(r.count_b), fmt_ns(_nan_none(r.per_call_a)),
             fmt_ns(_nan_none(r.per_call_b)), ("+" if r.delta_ns > 0 else "") + fmt_ns(r.delta_ns)]
            for r in diff.head(top).itertuples(index=False)]
    from traceviz.analyses.compare.runs import CHANGES

    changes = diff["change"].astype(str)
    # "same" is also inside no other label; "slower" may share a row with "fewer calls"
    counts = ", ".join(f"{changes.str.contains(k, regex=False).sum()} {k}" for k in CHANGES)
    ta, tb = diff.attrs.get("total_ns") or (diff["ns_a"].sum(), diff["ns_b"].sum())
    change = diff.attrs.get("total_change")
    total = (f"time{unit}, all names: A {fmt_ns(ta)} → B {fmt_ns(tb)}"
             + (f" ({change:+.1%})" if change is not None else "") + "; slower/faster: the "
             "mean time per call (total / calls)")
    t, left = fitted_table(f"Biggest {what} differences ({per}), A = {a} → B = {b}", cols,
                           rows, width, caption=f"{counts}\n{total}")
    parts: list[RenderableType] = [t]
    if apart := diff.attrs.get("windows_apart"):
        parts.append(Text.assemble(("note:", "yellow"), (
            f" the windows differ {apart:.0f}x in length and no step "
            "marks both: per-second rates compare different stretches of the runs (a "
            "warm-up beside a steady state reads as a change); traces with steps compare "
            "per step")))
    if (note := left_note(width, left)) is not None:
        parts.append(note)
    return Group(*parts)


def _calls(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 or x == int(x) else f"{x:,.2f}"


def _nan_none(x: float) -> float | None:
    return None if pd.isna(x) else x


MPE_TITLE = ("Mean percentage error of time per batch, row against column: the mean of "
             "(row - column) / column over batch k against batch k; above zero the row's "
             "batches took longer on that mean, below zero shorter")


def mpe_render(table: pd.DataFrame, width: int = 120,
               readings: list[MpeBothWays] | None = None) -> Group:
    rows = [[str(label), *("–" if pd.isna(v) else f"{v:+.1f}%" for v in row)]
            for label, row in table.iterrows()]
    parts: list[RenderableType] = list(fitted_groups(
        MPE_TITLE, Col("", "left", wrap=True), [Col(str(c)) for c in table.columns], rows,
        width))
    parts += [Text.assemble(("note:", "yellow"), " " + mpe_note(r)) for r in readings or ()]
    return Group(*parts)


def mpe_note(r: MpeBothWays) -> str:
    """A pair whose MPE reads the same way both ways: which run is longer by its median."""
    side = "above" if r.mpe_ab > 0 else "below"
    which = (f"by the median timed batch {r.longer} is longer ({fmt_ns(r.longer_s * 1e9)} "
             f"against {fmt_ns(r.shorter_s * 1e9)})" if r.longer is not None
             else f"their median timed batches are equal ({fmt_ns(r.longer_s * 1e9)})")
    return (f"{r.a} against {r.b} reads {r.mpe_ab:+.1f}% and {r.b} against {r.a} "
            f"{r.mpe_ba:+.1f}%, {side} zero both ways: their batches vary too much for the "
            f"MPE to say which is longer; {which}")


def amp_rows(b: AmpBreakdown) -> list[tuple[str, str]]:
    """The AMP breakdown as (part, time per step) rows, FP32 span to AMP span."""
    detail = {"matrix": " (gemm/attention/rnn)", "idle": " (host wait, queued; CPU: framework)"}
    rows = [("FP32 span", fmt_ns(b.fp32_span_ns))]
    for label, delta in b.parts():
        what = label.split()[0]
        rows.append((f"{'+' if delta > 0 else '−'} {label}{detail.get(what, '')}",
                     fmt_ns(abs(delta))))
    rows.append(("AMP span", fmt_ns(b.amp_span_ns)))
    return rows


def amp_verdict(b: AmpBreakdown) -> str:
    """The profiled span's change and, where both runs were timed without the profiler,
    the unprofiled change, which is the one to believe where the two disagree."""
    verdict = "faster" if b.span_delta_ns < 0 else "slower"
    line = (f"Profiled span: AMP is {fmt_ns(abs(b.span_delta_ns))} per step {verdict}; "
            f"tensor-core share {fmt_pct(b.tensor_core_share_fp32)} → "
            f"{fmt_pct(b.tensor_core_share_amp)}.")
    if b.fp32_time_s and b.amp_time_s:
        change = b.amp_time_s / b.fp32_time_s - 1
        line += (f" Without the profiler: {fmt_ns(b.fp32_time_s * 1e9)} → "
                 f"{fmt_ns(b.amp_time_s * 1e9)} per batch ({100 * change:+.1f}%)")
        if (change < 0) != (b.span_delta_ns < 0):
            line += ", the other way: the profiler's overhead differs between the runs"
        line += "."
    return line


def amp_render(b: AmpBreakdown, fp32: str, amp: str, width: int = 120) -> Group:
    t, _ = fitted_table(f"AMP breakdown per step: {fp32} → {amp}",
                        (Col("part", "left", wrap=True), Col("time")),
                        [list(r) for r in amp_rows(b)], width)
    return Group(t, Text(amp_verdict(b)))


# up to this many ranks (steps) a table lists each; a job of hundreds lists its slowest
# ranks (its steps of widest spread)


def sweep_on_cpu(df: pd.DataFrame) -> bool:
    """Whether every point of a sweep that ran was a CPU trace: its rates are then shown
    in GFLOP/s (``units.flop_rate``), where TFLOP/s would read 0.00."""
    if not {"cpu_trace", "status"} <= set(df):
        return False
    done = df["cpu_trace"][df["status"] == "ok"]
    return bool(len(done)) and bool(done.fillna(False).astype(bool).all())


def _sweep_cols(unit: str) -> tuple[Col, ...]:
    return (Col("point", "left"), Col("time/batch"), Col("min - max", drop=5),
            Col("sequences/s", drop=6), Col(unit, drop=3), Col("MFU", drop=4),
            Col("idle", drop=7), Col("first call", drop=2),
            Col("top kernel", "left", drop=1, name=True))


def _first_call(r: object) -> str:
    """The first batches' time above the median, with the framework's own compile time
    where it reported one; "–" for a sweep written before either."""
    first, comp = getattr(r, "first_call_s", None), getattr(r, "framework_compile_s", None)
    if first is None or first != first:
        return "–"
    return f"{first:.2f} s" + (f" (compile {comp:.2f})" if comp is not None and comp == comp
                               else "")


def sweep_render(df: pd.DataFrame, name: str, width: int = 120) -> Group:
    """The points of a sweep that ran: time per batch (NOISY marked) and its range, rate,
    model TFLOP/s (GFLOP/s on a CPU) and MFU, idle share, first-call time, top kernel."""
    ok = df[df["status"] == "ok"]
    unit, scale = flop_rate(sweep_on_cpu(df))

    def missing(x: object) -> bool:
        return x is None or x != x

    rows = []
    for r in ok.itertuples(index=False):
        tflops, mfu = getattr(r, "model_tflops", None), getattr(r, "mfu", None)
        noisy = " NOISY" if getattr(r, "noisy", False) is True else ""
        rows.append([str(r.point), f"{r.time_per_batch_s * 1e3:.3f} ms{noisy}",
                     f"{r.time_min_s * 1e3:.3f}-{r.time_max_s * 1e3:.3f}",
                     f"{r.sequences_per_s:,.1f}",
                     "–" if tflops is None or missing(tflops) else f"{tflops * scale:,.2f}",
                     "–" if missing(mfu) else fmt_pct(mfu),
                     "–" if missing(r.idle_fraction) else fmt_pct(r.idle_fraction),
                     _first_call(r), str(r.top_kernel)])
    t, left = fitted_table(f"Sweep {name} ({len(ok)} of {len(df)} points ok)",
                           _sweep_cols(unit), rows, width)
    note = left_note(width, left, where=f"a wider terminal or {name}")
    return Group(t) if note is None else Group(t, note)
