"""The AMP view: time spent converting between floating-point formats.

Cast work: kernels whose name shows a conversion or whose launching op is a cast (leaf
cast ops on a CPU trace). Cast ops: framework conversions (``aten::_to_copy`` and the
``aten::copy_`` it delegates to, TF ``Cast``, HLO ``convert``) counted once: an op nested
in another cast op is part of it. With recorded dtypes (torch.profiler's
``record_shapes``), a copy that keeps the floating-point format, or converts to or from an
integer or bool type, is not a cast (``normalize``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from traceviz.algos.optree import op_parents
from traceviz.analyses.summary.protocol import Inputs, Section

if TYPE_CHECKING:  # types only: trace.py's notebook API imports analyses
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace


@dataclass(frozen=True)
class CastSummary:
    count: int                # cast kernels (or cast leaf ops on a CPU trace)
    total_ns: int
    share_of_busy: float | None
    cast_ops: int             # outermost framework cast ops
    top: pd.DataFrame         # name, op, count, total_ns


def cast_rows(work: pd.DataFrame) -> pd.DataFrame:
    return work[work["is_cast"]]


def outer_cast_ops(trace: Trace) -> pd.DataFrame:
    """Cast op rows not nested in another cast op (``_to_copy`` over its ``copy_``)."""
    ev = trace.events
    ops = ev[(ev["kind"] == "op") & ev["is_cast"]]
    return ops[op_parents(ops) < 0] if len(ops) else ops


def cast_summary(trace: Trace, work: pd.DataFrame, busy_ns: int) -> CastSummary:
    casts = cast_rows(work)
    total = int(casts["dur_ns"].sum())
    g = casts.groupby(["name", "op"], observed=True, dropna=False)
    top = pd.DataFrame({"count": g.size(), "total_ns": g["dur_ns"].sum()}).reset_index()
    top = top.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)
    return CastSummary(len(casts), total, total / busy_ns if busy_ns else None,
                       len(outer_cast_ops(trace)), top)


def _json(s: Summary, top: int) -> dict[str, Any]:
    c = s.casts
    return {"casts": {"count": c.count, "total_ns": c.total_ns,
                      "share_of_busy": c.share_of_busy, "cast_ops": c.cast_ops,
                      "top": [{"name": str(r.name), "op": None if r.op != r.op else r.op,
                               "count": int(r.count), "total_ns": int(r.total_ns)}
                              for r in c.top.head(5).itertuples(index=False)]}}


def _compute(i: Inputs, s: Summary) -> CastSummary:
    return cast_summary(i.trace, i.work, s.trace_busy_ns)


SECTION = Section(_json, _compute)
