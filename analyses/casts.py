"""The AMP view: time spent converting dtypes."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from traceviz.classify import CAST_OPS
from traceviz.trace import Trace


@dataclass(frozen=True)
class CastSummary:
    count: int                # cast kernels (or cast leaf ops on a CPU trace)
    total_ns: int
    share_of_busy: float | None
    cast_ops: int             # framework cast ops (aten::_to_copy, TF Cast)
    top: pd.DataFrame         # name, op, count, total_ns


def cast_rows(work: pd.DataFrame) -> pd.DataFrame:
    return work[work["is_cast"]]


def cast_summary(trace: Trace, work: pd.DataFrame, busy_ns: int) -> CastSummary:
    casts = cast_rows(work)
    total = int(casts["dur_ns"].sum())
    ops = trace.events[trace.events["kind"] == "op"]
    n_ops = int(ops["name"].astype(str).isin(CAST_OPS).sum())
    g = casts.groupby(["name", "op"], observed=True, dropna=False)
    top = pd.DataFrame({"count": g.size(), "total_ns": g["dur_ns"].sum()}).reset_index()
    top = top.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)
    return CastSummary(len(casts), total, total / busy_ns if busy_ns else None, n_ops, top)
