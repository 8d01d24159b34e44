"""The roofline and memory-over-time charts of ``traceviz analyze --plot``."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from traceviz.analyses.efficiency.ops import Efficiency  # noqa: E402
from traceviz.analyses.summary.footprint import Memory  # noqa: E402
from traceviz.table.names import distinct_names  # noqa: E402
from traceviz.units import flop_rate  # noqa: E402


def roofline_points(e: Efficiency) -> pd.DataFrame:
    """The op groups a roofline places: those with FLOPs, an intensity and a rate."""
    g = e.groups
    return g[g["intensity"].notna() & (g["flops"] > 0) & g["tflops"].notna()]


def roofline_chart(e: Efficiency, label: str, top: int = 12) -> plt.Figure:
    """Op groups as points (FLOP/byte, achieved TFLOP/s), sized by device time; the
    device's bandwidth roof and a compute roof per precision the groups use, labelled
    with the device and precision. Without peaks: the points alone."""
    fig, ax = plt.subplots(figsize=(10, 6.5))
    g = roofline_points(e)
    if not len(g):  # nothing to place: analyze --plot does not draw it (blank_charts)
        ax.text(0.5, 0.5, "no op with FLOPs and bytes in this trace", ha="center",
                va="center", transform=ax.transAxes)
        ax.set_title(f"{label}: roofline")
        return fig
    unit, scale = flop_rate(e.cpu)
    x = g["intensity"].to_numpy(float)
    y = g["tflops"].to_numpy(float) * scale
    size = 30 + 600 * g["time_ns"].to_numpy(float) / max(float(g["time_ns"].max()), 1.0)
    lo, hi = min(x.min(), 0.1) / 2, max(x.max(), 10.0) * 4
    peak = e.peak
    if peak is not None and peak.bandwidth:
        xs = np.geomspace(lo, hi, 200)
        for key in sorted(set(g["peak_key"].dropna())):
            roof = peak.figures[key]
            ax.plot(xs, scale * np.minimum(roof, xs * peak.bandwidth / 1e3), lw=1.2,
                    label=f"{key} roof {roof * scale:g} {unit}")
        ax.plot(xs, scale * xs * peak.bandwidth / 1e3, ls=":", color="grey", lw=0.8,
                label=f"memory {peak.bandwidth:g} GB/s")
    colors = {"compute": "tab:red", "memory": "tab:blue"}
    for r, xi, yi, si in zip(g.itertuples(index=False), x, y, size, strict=True):
        ax.scatter([xi], [yi], s=si, alpha=0.6, color=colors.get(r.bound, "tab:grey"),
                   edgecolor="black", linewidth=0.5)
    # points numbered in order of time, named in a key beside the plot: names written
    # beside the points overlap where groups sit close (same shapes, other precisions)
    ops = distinct_names([str(op).removeprefix("aten::") for op in g["op"].head(top)], 24)
    for members in _close(x[:len(ops)], y[:len(ops)]):  # one label per cluster
        first = members[0]
        ax.annotate(", ".join(str(m + 1) for m in members), (x[first], y[first]),
                    fontsize=7, xytext=(6, 6), textcoords="offset points",
                    fontweight="bold", bbox={"boxstyle": "round,pad=0.15", "fc": "white",
                                             "ec": "none", "alpha": 0.8})
    key = "\n".join(f"{n:>2}  {op}" for n, op in enumerate(ops, 1))
    ax.text(1.02, 1.0, key, transform=ax.transAxes, fontsize=7, va="top", ha="left",
            family="monospace")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel(f"achieved {unit}")
    device = peak.device if peak else (e.device or "unknown device")
    what = "CPU op" if e.cpu else "device"
    ax.set_title(f"{label}: roofline on {device} (points: op groups, area ~ {what} time)")
    if peak is not None and peak.bandwidth:
        ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def _close(x: np.ndarray, y: np.ndarray, near: float = 0.04) -> list[list[int]]:
    """The points in groups that would share a label's place: each point joins the first
    group whose first point lies within ``near`` of the log-scaled axes' extent."""
    lx, ly = np.log10(np.maximum(x, 1e-30)), np.log10(np.maximum(y, 1e-30))
    span_x = max(float(np.ptp(lx)), 1.0) if len(lx) else 1.0
    span_y = max(float(np.ptp(ly)), 1.0) if len(ly) else 1.0
    out: list[list[int]] = []
    for i in range(len(lx)):
        for members in out:
            j = members[0]
            if abs(lx[i] - lx[j]) / span_x < near and abs(ly[i] - ly[j]) / span_y < near:
                members.append(i)
                break
        else:
            out.append([i])
    return out


def memory_chart(m: Memory, label: str) -> plt.Figure:
    """The allocator's total over the profiled steps, per device (bytes allocated)."""
    fig, ax = plt.subplots(figsize=(10, 4.5))
    s = m.series
    if not len(s):
        ax.text(0.5, 0.5, "no allocator events in this trace\n(torch.profiler "
                "profile_memory=True records them)", ha="center", va="center",
                transform=ax.transAxes)
    for dev, rows in s.groupby("device"):
        where = "host" if int(dev) < 0 else f"GPU {int(dev)}"
        ax.step(rows["ts_ns"].to_numpy() / 1e6, rows["total"].to_numpy() / 2**20,
                where="post", label=where)
    if len(s):
        ax.legend(fontsize=8)
    ax.set_xlabel("time (ms from the trace's start)")
    ax.set_ylabel("allocated (MiB)")
    ax.set_title(f"{label}: memory allocated over time")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig
