"""The loss of every timed batch of a sweep's points, one line per variant: equivalent
variants on the same data and seed draw the same curve, another model its own."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# equal curves lie on top of each other: each series gets its own line style and marker,
# so every one of them stays visible
_STYLES = list(itertools.product(("o", "x", "s", "^", "+", "d"), ("-", "--", ":", "-.")))


def _losses(v: object) -> np.ndarray | None:
    if isinstance(v, (list, tuple, np.ndarray)) and len(v):
        return np.asarray(v, dtype=float)
    return None


def loss_curves(ok: pd.DataFrame, label: str) -> plt.Figure | None:
    """Loss against batch number (counted from the first warm-up batch, so runs with
    other warm-up counts line up), a panel per (batch, hidden, seq), a line per series
    (``ok["series"]``); None where no point recorded losses."""
    if "loss_per_batch" not in ok:
        return None
    sel = ok[ok["loss_per_batch"].map(lambda v: _losses(v) is not None)]
    if sel.empty:
        return None
    groups = sorted(sel[["batch", "hidden", "seq"]].drop_duplicates().itertuples(index=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
    styles = {s: _STYLES[i % len(_STYLES)] for i, s in enumerate(sorted(sel["series"].unique()))}
    for ax, (batch, hidden, seq) in zip(axes[0], groups, strict=True):
        part = sel[(sel["batch"] == batch) & (sel["hidden"] == hidden) & (sel["seq"] == seq)]
        for r in part.itertuples(index=False):
            y = _losses(r.loss_per_batch)
            assert y is not None
            first = getattr(r, "loss_first_batch", 0)
            first = 0 if first is None or first != first else int(first)
            marker, line = styles[r.series]
            ax.plot(first + np.arange(len(y)), y, marker=marker, linestyle=line, markersize=4,
                    label=r.series, markerfacecolor="none")
        ax.set_xlabel("batch (from the first warm-up batch)")
        ax.set_ylabel("loss")
        ax.set_title(f"batch {batch}, hidden {hidden}, seq {seq}")
        ax.legend(fontsize=7)
    fig.suptitle(f"{label}: loss of every timed batch", fontsize=10)
    fig.tight_layout()
    return fig
