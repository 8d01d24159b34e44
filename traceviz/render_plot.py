"""Matplotlib charts of an analysis ``Summary`` (PNG and SVG). Imported only for --plot."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from traceviz.analyses.summary import Summary  # noqa: E402
from traceviz.units import fmt_ns, short_name  # noqa: E402

CHART_NAMES = ("kernels_pie", "launch_overhead")


def kernel_pie(summary: Summary, top: int = 8) -> plt.Figure:
    """Top-N kernels by total time plus "others" (the seeds' Figure 5 layout)."""
    k = summary.kernels
    labels = [short_name(n, 40) for n in k["name"].head(top)]
    sizes = list(k["total_ns"].head(top))
    rest = k["total_ns"].iloc[top:].sum()
    if rest > 0:
        labels.append(f"others ({len(k) - top})")
        sizes.append(rest)
    fig, ax = plt.subplots(figsize=(10, 6))
    if sum(sizes) > 0:
        wedges, _ = ax.pie(sizes, startangle=90, counterclock=False)
        total = sum(sizes)
        legend = [f"{lab}  {100 * s / total:.1f}%" for lab, s in zip(labels, sizes, strict=True)]
        ax.legend(wedges, legend, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
                  frameon=False)
    else:
        ax.text(0.5, 0.5, "no kernel time", ha="center", va="center")
    what = "leaf ops" if summary.cpu_trace else "kernels"
    ax.set_title(f"Time by {what} (total {fmt_ns(summary.kernel_total_ns)})")
    ax.axis("equal")
    fig.tight_layout()
    return fig


def launch_chart(summary: Summary) -> plt.Figure:
    """Busy, waiting for host and queued idle per step window and device; launch call,
    delay and kernel times."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels, parts = [], {"busy": [], "wait": [], "queued": [], "idle": []}
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
    for key, label, color in styles:
        if any(parts[key]):
            left.bar(x, parts[key], bottom=bottom, label=label, color=color)
            bottom = [b + v for b, v in zip(bottom, parts[key], strict=True)]
    left.set_xticks(list(x), labels, fontsize=7)
    left.set_ylabel("ms")
    left.set_title("Where each window's time went")
    left.legend(fontsize=8)

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


def summary_charts(summary: Summary) -> dict[str, plt.Figure]:
    """The charts of ``traceviz analyze --plot``, by file stem."""
    return {"kernels_pie": kernel_pie(summary), "launch_overhead": launch_chart(summary)}
