"""Matplotlib figures: a ``Summary`` (analyze --plot), runs side by side, an AMP
breakdown, a sweep. Imported only when asked to plot; saving is the CLI's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from traceviz.analyses.compare.amp_breakdown import AmpBreakdown  # noqa: E402
from traceviz.analyses.compare.runs import RunFigures  # noqa: E402
from traceviz.analyses.summary.figures import Summary  # noqa: E402
from traceviz.render.loss_curves import loss_curves  # noqa: E402
from traceviz.render.terminal.runs_view import sweep_on_cpu  # noqa: E402
from traceviz.table.names import distinct_names  # noqa: E402
from traceviz.table.schema import CATEGORIES  # noqa: E402
from traceviz.units import flop_rate, fmt_ns  # noqa: E402

if TYPE_CHECKING:  # the section types only, for the chart functions' arguments
    from traceviz.analyses.efficiency.ops import Efficiency
    from traceviz.analyses.summary.footprint import Memory

# analyze --plot, by file stem
SUMMARY_CHARTS = ("kernels_pie", "launch_overhead", "roofline", "memory")


def kernel_pie(summary: Summary, label: str, top: int = 8) -> plt.Figure:
    """Top-N kernels by total time plus "others" (the reproduced studies' pie) of the run
    named ``label``."""
    k = summary.kernels
    total_ns = k["total_ns"].sum()
    # a slice under 1% is not readable: such kernels join "others" (the first stays)
    big = (k["total_ns"] >= 0.01 * total_ns).to_numpy().copy() if total_ns \
        else np.ones(len(k), bool)
    big[0:1] = True
    n = int(min(top, np.argmin(big) if not big.all() else len(k)))
    labels = distinct_names(k["name"].head(n).astype(str), 40)  # the full names: --json
    sizes = list(k["total_ns"].head(n))
    rest = k["total_ns"].iloc[n:].sum()
    if rest > 0:
        labels.append(f"others ({len(k) - n})")
        sizes.append(rest)
    # small beside the page: the pie a third of the width, its legend beside it
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    if sum(sizes) > 0:
        wedges, _ = ax.pie(sizes, startangle=90, counterclock=False)
        total = sum(sizes)
        legend = [f"{lab}  {100 * s / total:.1f}%" for lab, s in zip(labels, sizes, strict=True)]
        ax.legend(wedges, legend, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
                  frameon=False)
    else:
        ax.text(0.5, 0.5, "no kernel time", ha="center", va="center")
    what = "CPU ops" if summary.cpu_trace else "kernels"
    ax.set_title(f"{label}: time by {what} (total {fmt_ns(summary.kernel_total_ns)})")
    ax.axis("equal")
    fig.tight_layout()
    return fig


def launch_chart(summary: Summary, label: str) -> plt.Figure:
    """Busy, waiting for host and queued idle per step window and device; beside it, on a
    GPU trace, launch call, delay and kernel times (a CPU trace has no launches)."""
    if summary.cpu_trace:
        fig, left = plt.subplots(figsize=(7, 4.5))
    else:
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels: list[str] = []
    parts: dict[str, list[float]] = {"busy": [], "wait": [], "queued": [], "idle": []}
    for d in summary.devices:
        dev = "host" if d.device < 0 else f"GPU {d.device}"
        for r in d.per_step.itertuples(index=False):
            labels.append(dev if r.step < 0 else f"{dev}\nstep {r.step}")
            idle = r.span_ns - r.busy_ns
            known = not pd.isna(r.host_wait_ns)
            parts["busy"].append(r.busy_ns / 1e6)
            parts["wait"].append(r.host_wait_ns / 1e6 if known else 0.0)
            parts["queued"].append(r.queued_idle_ns / 1e6 if known else 0.0)
            parts["idle"].append(0.0 if known else idle / 1e6)
    x = range(len(labels))
    bottom = [0.0] * len(labels)
    styles = [("busy", "busy", "#2a7ab0"),
              ("wait", "waiting for host (launch-bound)", "#e8a33d"),
              ("queued", "idle, launched work queued", "#9a9a9a"),
              ("idle", "framework overhead" if summary.cpu_trace else "idle (cause unknown)",
               "#e8a33d" if summary.cpu_trace else "#cfcfcf")]
    for key, part, color in styles:
        if any(parts[key]):
            left.bar(x, parts[key], bottom=bottom, label=part, color=color)
            bottom = [b + v for b, v in zip(bottom, parts[key], strict=True)]
    left.set_xticks(list(x), labels, fontsize=7)
    left.set_ylabel("ms")
    left.set_title(f"{label}: where each window's time went")
    left.legend(fontsize=8)
    if summary.cpu_trace:
        fig.tight_layout()
        return fig

    lo = summary.launches
    groups = [("launch call", lo.kernel.call), ("launch delay", lo.delay),
              ("kernel", summary.kernel_dur)]
    names = [g for g, _ in groups]
    med = [(d.median_ns or 0) / 1e3 for _, d in groups]
    p90 = [(d.p90_ns or 0) / 1e3 for _, d in groups]
    xs = range(len(groups))
    right.bar([i - 0.2 for i in xs], med, width=0.4, label="median", color="#2a7ab0")
    right.bar([i + 0.2 for i in xs], p90, width=0.4, label="p90", color="#b0412a")
    right.set_xticks(list(xs), names)
    right.set_ylabel("µs")
    if any(v > 0 for v in med + p90):
        right.set_yscale("log")
    right.set_title(f"Launch overhead ({lo.short_kernels:,} kernels shorter than their launch)")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class SummaryCharts:
    """``analyze --plot``'s charts: those with something to draw, by file stem, and why
    each of the others has nothing (a blank chart is not drawn)."""

    figures: dict[str, plt.Figure]
    not_drawn: dict[str, str]


def blank_charts(summary: Summary) -> dict[str, str]:
    """Of ``SUMMARY_CHARTS``, those ``summary`` gives nothing to draw (no slice, bar,
    point or line), each with the reason in a few words."""
    from traceviz.render.roofline import roofline_points

    why = {}
    if not summary.kernels["total_ns"].sum() > 0:
        why["kernels_pie"] = ("the trace records no " +
                              ("op time" if summary.cpu_trace else "kernel time"))
    if not any(len(d.per_step) for d in summary.devices):
        why["launch_overhead"] = "the trace has no device or step window to draw"
    if summary.efficiency is None:
        why["roofline"] = "no efficiency figures were computed"
    elif not len(roofline_points(summary.efficiency)):
        why["roofline"] = ("no op has both FLOPs and bytes (the trace records no op shapes "
                           "or costs to count them from)")
    if summary.memory is None:
        why["memory"] = "no memory figures were computed"
    elif not len(summary.memory.series):
        why["memory"] = "the trace records no memory (allocator) events"
    elif summary.memory.series.groupby("device").size().max() < 2:  # a line needs two
        why["memory"] = "the trace records one memory event per device: no line to draw"
    return why


def summary_charts(summary: Summary, label: str) -> SummaryCharts:
    """The charts of ``traceviz analyze --plot`` that have something to draw, by file
    stem (``SUMMARY_CHARTS``), and why the others were not drawn; the roofline and
    memory charts need a summary made ``with_efficiency``."""
    from traceviz.render.roofline import memory_chart, roofline_chart

    blank = blank_charts(summary)
    draw = {"kernels_pie": lambda: kernel_pie(summary, label),
            "launch_overhead": lambda: launch_chart(summary, label),
            # blank_charts leaves out a roofline or memory chart without its section
            "roofline": lambda: roofline_chart(cast("Efficiency", summary.efficiency), label),
            "memory": lambda: memory_chart(cast("Memory", summary.memory), label)}
    return SummaryCharts({stem: draw[stem]() for stem in SUMMARY_CHARTS if stem not in blank},
                         blank)


def category_bars(runs: list[RunFigures]) -> plt.Figure:
    """Stacked bars per run: its span per step, split into busy time by category (shared
    where categories overlap, so the bar never exceeds the span) and idle time (host
    wait and queued idle on a GPU, framework overhead on a CPU)."""
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(runs) + 3), 4.5))
    bottom = [0.0] * len(runs)
    x = range(len(runs))

    def stack(vals: list[float], label: str, **style) -> None:
        nonlocal bottom
        if any(v > 0 for v in vals):
            ax.bar(x, vals, bottom=bottom, label=label, **style)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]

    for cat in CATEGORIES:
        stack([r.category_busy_ns[cat] / r.per_step / 1e6 for r in runs], cat)
    idle = [(r.span_ns - r.busy_ns) / r.per_step / 1e6 for r in runs]
    wait = [(r.host_wait_ns or 0) / r.per_step / 1e6 for r in runs]
    queued = [(r.queued_idle_ns or 0) / r.per_step / 1e6 for r in runs]
    cpu = [r.cpu_trace for r in runs]
    unknown = [0.0 if c or r.host_wait_ns is not None else i
               for c, r, i in zip(cpu, runs, idle, strict=True)]
    stack([i if c else 0.0 for c, i in zip(cpu, idle, strict=True)], "framework overhead",
          color="#cdbfe3", hatch="//", edgecolor="#7b68a6")
    stack(wait, "idle, waiting for host", color="#f0d9a8", hatch="..", edgecolor="#b08a3d")
    stack(queued, "idle, work queued", color="#b9cfe0", hatch="xx", edgecolor="#5b7d99")
    stack(unknown, "idle (cause unknown)", color="#f2f2f2", edgecolor="#9a9a9a")
    for i, r in enumerate(runs):
        span = r.span_ns / r.per_step / 1e6
        ax.plot([i - 0.45, i + 0.45], [span, span], color="black", linewidth=1)
        ax.annotate(f"span {fmt_ns(r.span_ns / r.per_step)}", (i, span), ha="center",
                    va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(list(x), [r.label for r in runs], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("ms per step" if all(r.steps for r in runs) else "ms per step (or window)")
    ax.set_title("Where each run's span goes, by category: " + ", ".join(r.label for r in runs))
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def amp_waterfall(b: AmpBreakdown, fp32: str, amp: str) -> plt.Figure:
    steps = b.parts()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.bar(0, b.fp32_span_ns / 1e6, color="#2a7ab0")
    level = b.fp32_span_ns
    for i, (_, delta) in enumerate(steps, 1):
        ax.bar(i, delta / 1e6, bottom=level / 1e6, color="#b0412a" if delta > 0 else "#3f9b4f")
        ax.annotate(("+" if delta > 0 else "−") + fmt_ns(abs(delta)),
                    (i, max(level, level + delta) / 1e6), ha="center", va="bottom",
                    fontsize=7, xytext=(0, 2), textcoords="offset points")
        level += delta
    ax.bar(len(steps) + 1, b.amp_span_ns / 1e6, color="#2a7ab0")
    highest = max(b.fp32_span_ns, b.amp_span_ns, *np.cumsum([b.fp32_span_ns]
                                                             + [d for _, d in steps]))
    ax.set_ylim(0, 1.1 * highest / 1e6)  # room for the labels above the bars
    ax.set_xticks(range(len(steps) + 2), [fp32, *[s for s, _ in steps], amp], rotation=15,
                  fontsize=8)
    ax.set_ylabel("ms per step")
    ax.set_title(f"AMP: where the profiled step's time went, {fp32} → {amp}", fontsize=10)
    fig.tight_layout()
    return fig


def sweep_plots(df: pd.DataFrame, label: str = "sweep") -> dict[str, plt.Figure]:
    """Execution time vs batch size and vs timesteps, one line per variant (+amp), and the
    loss curves where the points recorded losses; each figure is titled with the sweep's
    ``label``."""
    ok = df[df["status"] == "ok"].copy()
    ok["series"] = ok["model"] + ok["amp"].map(lambda a: "" if a == "none" else f" ({a})")
    figs = {}
    for axis, other, name in (("batch", "seq", "time_vs_batch"), ("seq", "batch", "time_vs_seq")):
        if ok[axis].nunique() < 2:
            continue
        groups = sorted(ok[["hidden", other]].drop_duplicates().itertuples(index=False))
        fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
        for ax, (hidden, fixed) in zip(axes[0], groups, strict=True):
            sel = ok[(ok["hidden"] == hidden) & (ok[other] == fixed)]
            for series, part in sel.groupby("series"):
                part = part.sort_values(axis)
                med = part["time_per_batch_s"].to_numpy(float) * 1e3
                # the timed batches' min-max as bars: a noisy median is not a clean point
                lo = part.get("time_min_s", part["time_per_batch_s"]).to_numpy(float) * 1e3
                hi = part.get("time_max_s", part["time_per_batch_s"]).to_numpy(float) * 1e3
                ax.errorbar(part[axis], med, yerr=[np.nan_to_num(med - lo),
                                                   np.nan_to_num(hi - med)],
                            marker="o", capsize=3, label=series)
                noisy = part.get("noisy", pd.Series(False, index=part.index)).fillna(False)
                if noisy.any():
                    ax.scatter(part[axis][noisy.to_numpy(bool)], med[noisy.to_numpy(bool)],
                               s=90, facecolors="none", edgecolors="red", zorder=3)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(sorted(sel[axis].unique()))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            # labels at 1-2-5 only: every minor tick labelled "%g" overlapped
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1, 2, 5)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel("batch size" if axis == "batch" else "timesteps")
            ax.set_ylabel("time per batch (ms)")
            ax.set_title(f"hidden {hidden}, {other} {fixed}")
            ax.legend(fontsize=7)
        fig.suptitle(f"{label}: time per batch vs "
                     + ("batch size" if axis == "batch" else "timesteps")
                     + " (median; bars: the timed batches' min-max; red ring: NOISY)",
                     fontsize=10)
        fig.tight_layout()
        figs[name] = fig
    if "model_tflops" in ok and ok["batch"].nunique() >= 2 and ok["model_tflops"].notna().any():
        figs["tflops_vs_batch"] = _tflops_vs_batch(ok, label)
    loss = loss_curves(ok, label)
    if loss is not None:
        figs["loss_curves"] = loss
    return figs


def _tflops_vs_batch(ok: pd.DataFrame, label: str) -> plt.Figure:
    """Model TFLOP/s (the workload's FLOPs per batch / median time per batch; GFLOP/s
    where every point ran on a CPU) against batch size, one line per variant, a panel per
    hidden size and sequence length: the LSTM studies' "performance against batch size"
    figure."""
    unit, scale = flop_rate(sweep_on_cpu(ok))
    groups = sorted(ok[["hidden", "seq"]].drop_duplicates().itertuples(index=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
    for ax, (hidden, seq) in zip(axes[0], groups, strict=True):
        sel = ok[(ok["hidden"] == hidden) & (ok["seq"] == seq)]
        for series, part in sel.groupby("series"):
            part = part.sort_values("batch")
            ax.plot(part["batch"], part["model_tflops"] * scale, marker="o", label=series)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(sel["batch"].unique()))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("batch size")
        ax.set_ylabel(f"model {unit}")
        ax.set_title(f"hidden {hidden}, seq {seq}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{label}: model {unit} vs batch size (workload FLOPs / median time)",
                 fontsize=10)
    fig.tight_layout()
    return fig
