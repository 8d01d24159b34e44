"""The host side of the critical path (``critical_path.py``): host ranges as its windows,
and what the host time before a call was (framework ops, or time between ops)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.analyses.replay.graph import ReplayGraph, Solution
from traceviz.analyses.replay.measure import moved_marks

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace


def host_ranges(g: ReplayGraph, sol: Solution, prefix: str) -> pd.DataFrame:
    """The host ranges named ``prefix...``, moved with the replay, as windows (numbered
    in time order; a range that overlaps the previous one is left out)."""
    from traceviz.errors import UsageError

    ev = g.trace.events
    names = ev["name"].astype(str)
    mine = ev[ev["kind"].isin(["annotation", "step"]).to_numpy()
              & names.str.startswith(prefix).to_numpy() & (ev["device"] < 0).to_numpy()]
    if mine.empty:
        raise UsageError(f"no host range named {prefix!r}... in the trace",
                         option="critical-path")
    start, end = moved_marks(g, sol, mine)  # the ranges follow their thread's calls
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    keep = np.r_[True, start[1:] >= np.maximum.accumulate(end)[:-1]]
    return pd.DataFrame({"step": np.arange(int(keep.sum())), "start_ns": start[keep],
                         "end_ns": end[keep]})


BETWEEN_OPS = "(between ops: Python, anything unrecorded)"


def between_ops(what: str) -> str:
    """The host-calls row of the time between ops on a thread running ``what`` (Python,
    or a TensorFlow/JAX executor: ``table/frameworks.between_ops_what``)."""
    return f"(between ops: {what}, anything unrecorded)"


def between_ops_names(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per host row, the name of the time between ops before it, by its thread (once per
    distinct thread)."""
    from traceviz.table.frameworks import between_ops_what

    ev = trace.events
    pid = ev["pid"].to_numpy(np.int64)[rows]
    tid = ev["tid"].to_numpy(np.int64)[rows]
    keys, at = np.unique(np.stack([pid, tid], axis=1), axis=0, return_inverse=True) \
        if len(rows) else (np.zeros((0, 2), np.int64), np.zeros(0, np.int64))
    names = np.array([between_ops(between_ops_what(trace.meta, ev["name"], int(p), int(t)))
                      for p, t in keys], dtype=object)
    return names[np.asarray(at).reshape(-1)] if len(rows) else np.zeros(0, object)
IN_OPS = "(framework ops between calls)"


def op_share(trace: Trace, g: ReplayGraph, nodes: np.ndarray) -> np.ndarray:
    """Per host node: the share of the recorded time before it (since its thread's
    previous call ended) that framework ops cover, outside any runtime call."""
    from traceviz.algos.intervals import covered_until, union_blocks

    out = np.zeros(len(nodes), float)
    if not len(nodes):
        return out
    ev = trace.events
    ops = ev[(ev["kind"] == "op").to_numpy()]
    end = g.h_ts[nodes]
    start = end - np.maximum(g.h_gap[nodes], 0)
    pid = ev["pid"].to_numpy(np.int64)[g.h_rows[nodes]]
    tid = ev["tid"].to_numpy(np.int64)[g.h_rows[nodes]]
    o_pid, o_tid = ops["pid"].to_numpy(np.int64), ops["tid"].to_numpy(np.int64)
    o_ts = ops["ts_ns"].to_numpy(np.int64)
    o_end = o_ts + ops["dur_ns"].to_numpy(np.int64)
    for p, t in set(zip(pid.tolist(), tid.tolist(), strict=True)):
        mine = (pid == p) & (tid == t)
        sel = (o_pid == p) & (o_tid == t)
        bs, be = union_blocks(o_ts[sel], o_end[sel])
        covered = covered_until(bs, be, end[mine]) - covered_until(bs, be, start[mine])
        length = np.maximum(end[mine] - start[mine], 1)
        out[mine] = np.clip(covered / length, 0.0, 1.0)
    return out
