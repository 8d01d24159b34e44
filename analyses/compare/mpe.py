"""Which of two runs takes longer per batch, beside their mean percentage error.

The MPE of a against b is the mean of (a_k - b_k) / b_k over batches paired in order. It is
not antisymmetric: where the batches vary (a first batch ten times the rest), a pair can
read above zero both ways (or below zero both ways), and neither reading says which run is
longer. The median timed batch does: ``mpe_readings`` gives it for every such pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from traceviz.analyses.compare.runs import RunFigures


@dataclass(frozen=True)
class MpeBothWays:
    """A pair whose MPE has the same sign both ways, and which run is longer by its
    median timed batch (``longer`` is None where the medians are equal)."""

    a: str
    b: str
    mpe_ab: float      # percent, a against b
    mpe_ba: float      # percent, b against a
    longer: str | None
    shorter: str | None
    longer_s: float    # the longer run's median timed batch
    shorter_s: float


def mpe_readings(runs: list[RunFigures], table: pd.DataFrame) -> list[MpeBothWays]:
    """The pairs of ``table`` (``mpe_table(runs)``) whose two readings share a sign, in
    run order, each with the run longer by its median timed batch."""
    by_label = {r.label: r for r in runs}
    labels = [str(x) for x in table.index]
    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            ab, ba = table.loc[a, b], table.loc[b, a]
            if pd.isna(ab) or pd.isna(ba) or (ab > 0) != (ba > 0) or ab == 0 or ba == 0:
                continue
            ta, tb = by_label[a].time_per_batch_s, by_label[b].time_per_batch_s
            if ta is None or tb is None:
                continue
            if ta == tb:
                longer = shorter = None
            else:
                longer, shorter = (a, b) if ta > tb else (b, a)
            out.append(MpeBothWays(a, b, float(ab), float(ba), longer, shorter,
                                   max(ta, tb), min(ta, tb)))
    return out
