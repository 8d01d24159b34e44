"""The Efficiency and Memory sections of ``traceviz analyze`` (rich renderables)."""

from __future__ import annotations

import json

from rich.console import Group, RenderableType
from rich.text import Text

from traceviz.analyses.efficiency import ops
from traceviz.analyses.efficiency.ops import Efficiency
from traceviz.analyses.summary import footprint
from traceviz.analyses.summary.figures import Summary
from traceviz.analyses.summary.footprint import Memory
from traceviz.render.terminal.fit import Col, fitted_table, left_note
from traceviz.render.terminal.page import Page, section_render
from traceviz.units import flop_rate, fmt_bytes, fmt_ns, fmt_pct


def _group_cols(cpu: bool) -> list[Col]:
    """At the narrowest: op, time, the FLOP rate, % of peak (what the section is for).
    A CPU trace: GFLOP/s, and no peak or bound columns (no peak figures for CPUs)."""
    cols = [Col("op", "left", name=True), Col("shapes", "left", drop=3),
            Col("prec", "left", drop=5), Col("calls", drop=6), Col("time"),
            Col("GFLOP", drop=2), Col("GB", drop=1), Col(flop_rate(cpu)[0]),
            Col("GB/s", drop=9), Col("FLOP/\nbyte", drop=4)]
    return cols + [Col("% of\npeak"), Col("% of\nBW", drop=7),
                   Col("bound", "left", drop=8)]


@section_render(ops.SECTION)
def efficiency_section(s: Summary, page: Page) -> None:
    """The Efficiency section (a summary made without it, as ranks make theirs: none)."""
    if s.efficiency is not None:
        page.add(efficiency_render(s.efficiency, top=page.top, width=page.width))


@section_render(footprint.SECTION)
def memory_section(s: Summary, page: Page) -> None:
    """The memory lines, where there is anything to say."""
    if s.memory is not None and (mem := memory_render(s.memory)):
        page.add(mem)


def _pct(x: float | None) -> str:
    """A share of a peak; below 1% with two significant digits (0.043%, not 0.0%)."""
    if x is None or x != x:
        return "–"
    return f"{100 * x:.2g}%" if 0 < x < 0.01 else fmt_pct(x)


def _num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None or x != x else f"{x:,.{digits}f}"


def _amount(total: float, rate: float, scale: float, digits: int) -> str:
    """A group's FLOPs or bytes: unknown ("–") where its rate is (no op of the group gave
    the figure; the table keeps 0 there), never 0."""
    return "–" if rate != rate and not total else _num(total / scale, digits)


def shapes_text(dims: str) -> str:
    """The tensor shapes of a dims record on one line, scalars left out."""
    try:
        d = json.loads(dims)
    except (ValueError, RecursionError):
        return dims
    shown = [s for s in d if isinstance(s, list) and s]
    text = " ".join("x".join(map(str, s)) if all(isinstance(v, int) for v in s)
                    else f"[{len(s)} tensors]" for s in shown)
    return text if len(text) <= 40 else text[:39] + "…"


def _peak_text(e: Efficiency) -> str | None:
    if e.peak is None:
        return None  # a note says so
    fig = e.peak.figures
    parts = [f"{k} {v:g}" for k, v in fig.items() if k != "bw"]
    bw = f", memory {fig['bw']:g} GB/s" if "bw" in fig else ""
    return (f"peak of {e.peak.device} (TFLOP/s): {', '.join(parts)}{bw}; "
            f"source: {e.peak.source}")


def efficiency_render(e: Efficiency, top: int = 15, width: int = 120) -> Group:
    """Op groups by device time with their rates against the peak, the run's totals,
    the time no formula covers, and the peak's source."""
    if e.reason:  # nothing measured: the reason alone, no zeros
        return Group(Text.assemble(("efficiency", "bold"), ": no figures: ", e.reason))
    parts: list[RenderableType] = []
    rows = []
    unit, scale = flop_rate(e.cpu)
    peaks = e.peak is not None or not e.cpu  # a CPU without --peak: no columns of "–"
    for r in e.groups.head(top).itertuples(index=False):
        prec = r.precision if isinstance(r.precision, str) else "?"
        key = f" ({r.peak_key})" if isinstance(r.peak_key, str) and r.peak_key != prec else ""
        rows.append([str(r.op).removeprefix("aten::"), shapes_text(r.dims),
                     f"{prec}{key}",
                     f"{int(r.calls):,}", fmt_ns(int(r.time_ns)),
                     _amount(r.flops, r.tflops, 1e9, 2), _amount(r.bytes, r.gbps, 1e9, 3),
                     _num(r.tflops * scale), _num(r.gbps, 2 if e.cpu else 0),
                     _num(r.intensity, 1), _pct(r.pct_peak), _pct(r.pct_bw),
                     r.bound if isinstance(r.bound, str) and r.bound else "–"][
                         :None if peaks else 10])
    if rows:
        cols = _group_cols(e.cpu)[:None if peaks else 10]
        table, left = fitted_table(
            "Efficiency: op groups (name and shapes) by "
            + ("CPU op time" if e.cpu else "device time"), cols, rows, width)
        parts.append(table)
        parts.append(Text("prec: the op's precision." if e.cpu and not peaks else
                          "prec: the op's precision, in parentheses the peak it is held "
                          "against where that differs (FP32 matrix ops on TF32 kernels: "
                          "tf32)." + (" bound: the side of the roofline's ridge point; low "
                                      "% of peak and of bandwidth together mean latency or "
                                      "launches bound it." if peaks else ""),
                          style="dim"))
        if left_line := left_note(width, {"efficiency": left}):
            parts.append(left_line)
    # an unknown figure is said to be (the notes below say why), never printed as 0
    moved = f"bytes {e.bytes / 1e9:,.2f} GB" if e.bytes is not None else \
        "bytes unknown (no dtypes recorded)" if e.flops is not None else "bytes unknown"
    digits = 3 if e.cpu else 1  # a CPU op's GFLOPs are small
    flops = "FLOPs unknown" if e.flops is None else f"FLOPs {e.flops / 1e9:,.{digits}f} G" + (
        " (the workload's)" if e.flops_from == "workload" else "")
    run = [f"{flops}, {moved} over {fmt_ns(e.time_ns)} of "
           f"{'CPU op' if e.cpu else 'kernel'} time "
           f"({fmt_pct(e.coverage)} covered by a formula)"]
    if e.flops is None:
        run.append(f"{unit} unknown")
    elif e.tflops_busy is not None and e.tflops_span is not None:
        run.append(f"{_num(e.tflops_busy * scale)} {unit} over busy time; "
                   f"{_num(e.tflops_span * scale)} {unit} over the span"
                   + (f" ({_pct(e.mfu_trace)} of the {e.run_key} peak)" if e.mfu_trace
                      is not None else ""))
    m = e.model or {}
    if m.get("model_flops_per_batch"):
        line = f"model: {m['model_flops_per_batch'] / 1e9:,.2f} GFLOP per batch"
        if m.get("model_tflops") is not None:
            line += f", {_num(m['model_tflops'] * scale)} {unit} at the median timed batch"
        if m.get("mfu") is not None:
            line += f", MFU {_pct(m['mfu'])} of the {e.run_key} peak"
        run.append(line)
    parts.append(Text.assemble(("efficiency", "bold"), ": ", "; ".join(run)))
    if len(e.uncovered):
        u = e.uncovered.head(5)
        text = ", ".join(f"{r.op} {fmt_pct(r.share)} ({r.note})"
                         for r in u.itertuples(index=False))
        more = len(e.uncovered) - len(u)
        parts.append(Text(f"no figures for: {text}" + (f" and {more} more" if more > 0
                                                        else ""), style="dim"))
    if (peak := _peak_text(e)) is not None:
        parts.append(Text(peak, style="dim"))
    for note in e.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts)


# bench.json's memory keys as a reader should take them
_MEMORY_LABELS = {
    "peak_allocated_bytes": "peak allocated",
    "peak_reserved_bytes": "peak reserved by the allocator",
    "total_bytes": "of the device's",
    "pool_bytes": "the allocator's pool (XLA's limit)",
    "peak_rss_bytes": "the process's peak resident set",
    "peak_rss_growth_bytes": "its growth during the timed batches (0: warm-up had "
                             "reached that peak)",
}


def memory_render(m: Memory) -> Group | None:
    """Peak allocated and the bytes allocated and freed per device and phase."""
    parts: list[RenderableType] = []
    b = m.bench or {}
    if b:
        items = [f"{label} {fmt_bytes(b[k])}" for k, label in _MEMORY_LABELS.items()
                 if b.get(k) is not None]
        parts.append(Text.assemble(("memory", "bold"), " (timed batches, no profiler): ",
                                   ", ".join(items)))
    for r in m.devices.itertuples(index=False):
        where = "host" if r.device < 0 else f"device {r.device}"
        ph = m.phases[m.phases["device"] == r.device]
        per = "; ".join(f"{p.phase} +{fmt_bytes(p.allocated)} -{fmt_bytes(p.freed)}"
                        for p in ph.itertuples(index=False))
        parts.append(Text.assemble(
            ("memory", "bold"), f" (profiled steps, {where}): peak allocated "
            f"{fmt_bytes(r.peak_allocated)}, {int(r.events):,} allocator events, "
            f"allocated {fmt_bytes(r.allocated)}, freed {fmt_bytes(r.freed)}"
            + (f" — {per}" if per else "")))
    for note in m.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts) if parts else None
