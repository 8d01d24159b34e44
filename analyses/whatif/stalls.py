"""The ``drop_host_stalls`` what-if scenario: the launching threads' host work that is not
issuing device work leaves the step: the stretches of 1 ms or more with nothing recorded
on the thread (untraced work: preprocessing, loading, logging) and its OS waits (sleep,
I/O, locks, time off the CPU, as nsys records them). What ``advise`` prices when the host
verdict's cause is untraced work or the OS (``advice/host_causes.py``): the action is to
move that work off the thread, or make the wait asynchronous.

Per host node the part of its gap (the host time before it since its thread's previous
call) that such stretches cover goes; the calls, the framework ops and the short gaps
between them stay (the cost of issuing work, which ``cuda_graphs`` prices).
"""

from __future__ import annotations

import numpy as np

from traceviz.algos.intervals import covered_until, union_blocks
from traceviz.algos.optree import thread_key
from traceviz.analyses.replay.graph import ReplayGraph
from traceviz.analyses.summary.waits import LONG_UNTRACED_NS
from traceviz.table.schema import is_in
from traceviz.units import fmt_ns


def _stalls(starts: np.ndarray, ends: np.ndarray, os_s: np.ndarray, os_e: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """A thread's stalls: the holes of at least ``LONG_UNTRACED_NS`` between its recorded
    calls and ops, and its OS rows, as sorted blocks."""
    bs, be = union_blocks(starts, ends)
    hole_s, hole_e = be[:-1], bs[1:]
    long = hole_e - hole_s >= LONG_UNTRACED_NS
    return union_blocks(np.r_[hole_s[long], os_s], np.r_[hole_e[long], os_e])


def stall_gaps(g: ReplayGraph) -> np.ndarray:
    """Per host node: the part of its gap that its thread's stalls cover."""
    ev = g.trace.events
    removed = np.zeros(len(g.h_ts), np.int64)
    if not len(g.h_ts):
        return removed
    host = ev["device"].to_numpy() < 0
    work = np.flatnonzero(is_in(ev["kind"], "runtime", "op") & host)
    oss = np.flatnonzero(is_in(ev["kind"], "os") & host)
    pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    w_thread, o_thread = thread_key(pid[work], tid[work]), thread_key(pid[oss], tid[oss])
    h_thread = thread_key(pid[g.h_rows], tid[g.h_rows])
    launching = np.unique(h_thread[g.h_launch])
    for t in launching:  # the threads that launch: a few
        w, o = work[w_thread == t], oss[o_thread == t]
        bs, be = _stalls(ts[w], end[w], ts[o], end[o])
        if not len(bs):
            continue
        mine = np.flatnonzero(h_thread == t)
        gap = np.maximum(g.h_gap[mine], 0)
        start = g.h_ts[mine]
        removed[mine] = covered_until(bs, be, start) - covered_until(bs, be, start - gap)
    return removed


def drop_host_stalls(g: ReplayGraph, _: float) -> tuple[ReplayGraph, list[str]]:
    if g.trace.is_cpu:
        return g, []
    removed = stall_gaps(g)
    if not removed.any():
        return g, []
    return g.with_changes(h_gap=g.h_gap - removed), [
        f"the launching threads' untraced stretches of {fmt_ns(LONG_UNTRACED_NS)} or more "
        f"and their OS waits leave the step ({fmt_ns(int(removed.sum()))} of host time "
        "between calls): moved to another thread, or made asynchronous",
        "the calls, the framework ops and the shorter gaps between them keep their time"]


def startup_nodes(g: ReplayGraph) -> np.ndarray:
    """Per host node: a start-up call (``summary/startup_calls.py``: a context made, a module
    loaded on first use, a first allocation). A scenario that removes launch calls keeps
    their time: a graph or a fused kernel pays its start-up once too."""
    from traceviz.analyses.summary.startup_calls import startup_calls

    rows = startup_calls(g.trace)["row"].to_numpy(np.int64)
    return np.isin(g.h_rows, rows)
