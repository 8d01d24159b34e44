"""Matplotlib charts for compare, amp and sweeps (imported only when asked to plot)."""

from __future__ import annotations

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from traceviz.analyses.amp import AmpBreakdown  # noqa: E402
from traceviz.analyses.compare import RunFigures  # noqa: E402
from traceviz.schema import CATEGORIES  # noqa: E402


def category_bars(runs: list[RunFigures]) -> plt.Figure:
    """Stacked bars: device time per step by category, one bar per run."""
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(runs) + 3), 4.5))
    bottom = [0.0] * len(runs)
    x = range(len(runs))
    for cat in CATEGORIES:
        vals = [r.category_ns[cat] / r.per_step / 1e6 for r in runs]
        if any(vals):
            ax.bar(x, vals, bottom=bottom, label=cat)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(list(x), [r.label for r in runs], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("ms per step")
    ax.set_title("Time by category")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def amp_waterfall(b: AmpBreakdown, fp32: str, amp: str) -> plt.Figure:
    steps = [("cast added", b.cast_added_ns), ("matrix time saved", -b.matrix_saved_ns),
             ("idle change", b.idle_change_ns), ("other", b.other_ns)]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.bar(0, b.fp32_span_ns / 1e6, color="#2a7ab0")
    level = b.fp32_span_ns
    for i, (_, delta) in enumerate(steps, 1):
        ax.bar(i, delta / 1e6, bottom=level / 1e6, color="#b0412a" if delta > 0 else "#3f9b4f")
        level += delta
    ax.bar(len(steps) + 1, b.amp_span_ns / 1e6, color="#2a7ab0")
    ax.set_xticks(range(len(steps) + 2), [fp32, *[s for s, _ in steps], amp], rotation=15,
                  fontsize=8)
    ax.set_ylabel("ms per step")
    ax.set_title("AMP: where the time went")
    fig.tight_layout()
    return fig


def sweep_plots(df: pd.DataFrame) -> dict[str, plt.Figure]:
    """Execution time vs batch size and vs timesteps, one line per variant (+amp)."""
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
                ax.plot(part[axis], part["time_per_batch_s"] * 1e3, marker="o", label=series)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(sorted(sel[axis].unique()))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.set_xlabel("batch size" if axis == "batch" else "timesteps")
            ax.set_ylabel("time per batch (ms)")
            ax.set_title(f"hidden {hidden}, {other} {fixed}")
            ax.legend(fontsize=7)
        fig.tight_layout()
        figs[name] = fig
    return figs
