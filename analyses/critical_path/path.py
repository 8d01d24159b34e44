"""What bounds each step: the critical path through the replay graph (``replay.py``).

The replay solves every host call and device row as the latest of its constraints (the
previous call of its thread, the row it waited for, its launch, the previous row of its
stream, a row of another stream it waited on). The constraint that gave a node its time
is its *binding* predecessor; following binding predecessors back from the last thing
that happened in a step window, to the window's start, is the step's critical path: the
one chain of host time, launch latency, device work, queue gaps and waits that its
length is made of. Time off the path could shrink without shortening the step.

Each node has two points, its start and its end; a point's predecessor and the kind of
the edge into it (host time, launch latency, device work, queue gap, synchronization)
are found for all points at once by comparing the solved times with each constraint.
The path itself is the ancestors of each window's last point, found by pointer doubling
(a few vectorized passes, not a walk per node).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.critical_path.hostops import IN_OPS, between_ops_names, host_ranges, op_share
from traceviz.analyses.critical_path.overlap import busy_within, ended_before
from traceviz.analyses.replay.graph import (
    NEVER,
    ReplayGraph,
    Solution,
    _group_starts,
    build,
    solve,
)
from traceviz.analyses.replay.measure import replayed_trace
from traceviz.analyses.stats import plain_row
from traceviz.analyses.work import analysis_windows

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

PARTS = ("host", "launch", "device", "queue", "sync")
# edge kinds into a point; the part of the path each one's time counts as. UNSEEN: a row
# that waited past its launch for something the trace does not show is bound by the
# device (the row of its device that ended last before it started), not by its launch;
# GRAPH: a graph's first kernel after its launch call (the runtime submitting the
# graph). Both are launched work waiting on the device's side: queued, not the host's
# launch latency. Any edge's time while the device ran other work is device time
# (overlap.py)
SOURCE, HOST, GAP, AWAIT, AFTER, QUEUE, LAUNCH, DEP, DEVICE, UNSEEN, GRAPH = range(11)
_PART_OF = {HOST: "host", GAP: "host", AWAIT: "sync", AFTER: "sync", QUEUE: "queue",
            LAUNCH: "launch", DEP: "sync", DEVICE: "device", SOURCE: "host",
            UNSEEN: "queue", GRAPH: "queue"}


@dataclass(frozen=True)
class Points:
    """Every node's start and end as points: host starts, host ends, device starts,
    device ends (in that order); per point its time, binding predecessor and edge kind."""

    value: np.ndarray
    pred: np.ndarray   # point index, -1: none (where the node was recorded to start)
    kind: np.ndarray   # edge kind into the point
    n_host: int
    n_dev: int

    def node(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(is a device row, index among host nodes or device rows) of points ``p``."""
        h = self.n_host
        is_dev = p >= 2 * h
        return is_dev, np.where(is_dev, (p - 2 * h) % max(self.n_dev, 1), p % max(h, 1))


def binding(g: ReplayGraph, sol: Solution) -> Points:
    """Each point's binding predecessor, from the solved times (integer arithmetic: the
    constraint that equals the solved time is the one that set it)."""
    h, d = len(g.h_ts), len(g.d_ts)
    hs, he, ds, de = 0, h, 2 * h, 2 * h + d  # offsets of the four point groups
    value = np.concatenate([sol.h_start, sol.h_end, sol.d_start, sol.d_end])
    pred = np.full(len(value), -1, np.int64)
    kind = np.full(len(value), SOURCE, np.int8)
    idx_h, idx_d = np.arange(h), np.arange(d)
    # a host call's start: the previous call's end + the host time between them
    chained = ~g.h_first
    pred[hs + idx_h[chained]] = he + idx_h[chained] - 1
    kind[hs + idx_h[chained]] = GAP
    # its end: its own time after its start, else the row it waited for, else the call
    # of another thread it waited for (ties: the host's own time)
    own = sol.h_start + g.h_dur
    aw = g.h_await >= 0
    d_end = sol.d_end if d else np.zeros(1, np.int64)  # a CPU trace: no device rows
    by_await = aw & (np.where(aw, d_end[np.maximum(g.h_await, 0)] + g.h_tail, NEVER)
                     == sol.h_end)
    af = g.h_after >= 0
    by_after = af & (np.where(af, sol.h_end[np.maximum(g.h_after, 0)] + g.h_after_lat
                              + g.h_dur, NEVER) == sol.h_end)
    by_own = own == sol.h_end
    end_kind = np.where(by_own, HOST, np.where(by_await, AWAIT, np.where(by_after, AFTER,
                                                                          HOST)))
    end_pred = np.where(end_kind == AWAIT, de + np.maximum(g.h_await, 0),
                        np.where(end_kind == AFTER, he + np.maximum(g.h_after, 0),
                                 hs + idx_h))
    pred[he:he + h], kind[he:he + h] = end_pred, end_kind
    # a device row's end: its start + its work; its start: the previous row of its stream
    # (+ the device's gap), its launch (+ latency), a row of another stream it waited on
    pred[de:de + d], kind[de:de + d] = ds + idx_d, DEVICE
    live = ~g.d_removed
    first = _group_starts(g.d_stream)
    prev = np.maximum(idx_d - 1, 0)
    by_stream = ~first & live & (sol.d_end[prev] + np.where(g.d_removed[prev], 0, g.d_gap[prev])
                                 == sol.d_start)
    launched = (g.d_launch >= 0) & live
    li = np.maximum(g.d_launch, 0)
    call = np.where(g.d_from_start, sol.h_start[li] if h else 0, sol.h_end[li] if h else 0)
    by_launch = launched & (call + g.d_offset == sol.d_start)
    dep = (g.d_dep >= 0) & live
    by_dep = dep & (sol.d_end[np.maximum(g.d_dep, 0)] + g.d_dep_lat == sol.d_start)
    start_kind = np.where(by_stream, QUEUE, np.where(by_dep, DEP, np.where(
        by_launch, LAUNCH, SOURCE)))
    start_pred = np.select(
        [start_kind == QUEUE, start_kind == DEP, start_kind == LAUNCH],
        [de + prev, de + np.maximum(g.d_dep, 0),
         np.where(g.d_from_start, hs, he) + li], -1)
    graph = launched & pd.Series(g.d_launch).duplicated(keep=False).to_numpy()
    start_kind = np.where((start_kind == LAUNCH) & graph, GRAPH, start_kind)
    if g.d_unseen is not None and d:
        # from what held it back last: its launch, or the device's row that ended last
        # before it (ended after the launch: the device, busy, not the host)
        before = ended_before(g, sol)
        unseen = (start_kind == LAUNCH) & g.d_unseen
        start_kind = np.where(unseen, UNSEEN, start_kind)
        device_later = (before >= 0) & (sol.d_end[np.maximum(before, 0)] > call)
        start_pred = np.where(unseen & device_later, de + before, start_pred)
    pred[ds:ds + d], kind[ds:ds + d] = start_pred, start_kind
    return Points(value, pred, kind.astype(np.int8), h, d)


def ancestors(pred: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """bool per point: on the chain of predecessors of any of ``ends`` (themselves
    included). Pointer doubling: after pass k the mask holds each end's first 2^k points,
    so a chain of n points takes log2(n) + 1 passes over the arrays."""
    n = len(pred)
    up = np.where(pred >= 0, pred, n)   # n: a sink that points to itself
    up = np.append(up, n)
    on = np.zeros(n + 1, bool)
    on[ends] = True
    while True:
        grown = on.copy()
        grown[up[on]] = True
        grown[n] = False
        if np.array_equal(grown, on) and (up[up] == up).all():
            return on[:n]
        on = grown
        up = up[up]


@dataclass
class CriticalPath:
    """Per step window: the path's length and its parts; what lies on it."""

    steps: pd.DataFrame     # step, start_ns, end_ns, length_ns, path_end_ns, and PARTS (ns)
    kernels: pd.DataFrame   # name, category, calls and total_ns (in the windows), on_path_ns,
    #                         on_path_calls, share (of its time in the windows on the path)
    ops: pd.DataFrame       # op (the framework op that launched the work), on_path_ns
    host_calls: pd.DataFrame  # name (runtime call or CPU op), on_path_ns
    is_cpu: bool
    notes: list[str] = field(default_factory=list)
    unit: str = "step"      # what a window is: a step, a host range, the whole trace
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    # the trace rows of the work on the path (kernels; on a CPU trace, ops)
    timed_step_ns: float | None = None     # the run's timed (unprofiled) median step
    profiler_overhead: float | None = None
    overhead_text: str = "unknown"         # as every output prints it (Timings')

    def totals(self) -> dict[str, int]:
        return {p: int(self.steps[f"{p}_ns"].sum()) for p in ("length", *PARTS)}

    def to_dict(self, top: int = 20) -> dict[str, Any]:
        def rows(df: pd.DataFrame) -> list[dict]:
            return [plain_row(r) for r in df.to_dict("records")]

        per = max(len(self.steps), 1)
        totals = self.totals()
        on = self.kernels[self.kernels["on_path_ns"] > 0].assign(
            on_path_ns_per_window=lambda d: d["on_path_ns"] / per,
            on_path_calls_per_window=lambda d: d["on_path_calls"] / per)
        off = self.kernels[self.kernels["on_path_ns"] == 0]
        return {"unit": self.unit, "windows": len(self.steps), "steps": rows(self.steps),
                "timed_step_ns": self.timed_step_ns,
                "profiler_overhead": self.profiler_overhead,
                "totals": totals,
                # as printed: per window (step, range), and each part's share of the length
                "per_window": {k: v / per for k, v in totals.items()},
                "shares": {p: totals[p] / totals["length"] if totals["length"] else None
                           for p in PARTS},
                "kernels": rows(on.head(top)),
                "off_path": {"kernels": len(off), "total_ns": int(off["total_ns"].sum()),
                             "total_ns_per_window": float(off["total_ns"].sum()) / per,
                             "top": rows(off.head(top))},
                "ops": rows(self.ops.head(top)),
                "host_calls": rows(self.host_calls.head(top).assign(
                    on_path_ns_per_window=lambda d: d["on_path_ns"] / per)),
                "notes": list(self.notes)}


def critical_path(trace: Trace, annotation: str | None = None, g: ReplayGraph | None = None,
                  sol: Solution | None = None) -> CriticalPath:
    """The critical path of every step window of ``trace`` as replayed (the whole trace
    where it marks no steps); ``annotation``: instead, of every host range whose name
    starts with it (``forward``, ``ProfilerStep``), from the range's start to its end.
    ``g``/``sol``: a replay already built (a scenario's)."""
    g = build(trace) if g is None else g
    sol = solve(g) if sol is None else sol
    pts = binding(g, sol)
    windows = _windows(g, sol) if annotation is None else host_ranges(g, sol, annotation)
    ws, we = windows["start_ns"].to_numpy(np.int64), windows["end_ns"].to_numpy(np.int64)
    kk, inside, pred, last, path = _walk(pts, ws, we)
    start_of = np.where(pred[path] >= 0, pts.value[np.maximum(pred[path], 0)], ws[kk[path]])
    amount = pts.value[path] - start_of
    kind = pts.kind[path]
    # an edge's time while the device ran other work is device time (the device, busy,
    # was not waiting for it); the rest is its kind's part
    hidden = np.where(kind == DEVICE, 0, busy_within(g, sol, start_of, pts.value[path]))
    host_part = np.where(kind == AFTER, np.minimum(amount - hidden, _host_dur(g, pts, path)),
                         0)
    queued = _beyond_latency(g, pts, path, amount - hidden)
    n = len(path)
    parts = pd.DataFrame({"window": np.tile(kk[path], 4),
                          "part": np.concatenate([
                              _part_codes(kind, trace.is_cpu), np.full(n, 0, np.int8),
                              np.full(n, PARTS.index("device"), np.int8),
                              np.full(n, PARTS.index("queue"), np.int8)]),
                          "ns": np.concatenate([amount - hidden - host_part - queued,
                                                host_part, hidden, queued])})
    by = parts.groupby(["window", "part"])["ns"].sum().unstack(fill_value=0)
    steps = windows.copy()
    steps["length_ns"] = we - ws
    steps["path_end_ns"] = np.full(len(ws), -1, np.int64)
    steps.loc[kk[last], "path_end_ns"] = pts.value[last]
    # where the path's first node starts: before it, the window holds no work on the path
    first = pd.Series(pts.value[path]).groupby(kk[path]).min()
    steps["path_start_ns"] = first.reindex(range(len(ws)), fill_value=-1).to_numpy(np.int64)
    for i, p in enumerate(PARTS):
        steps[f"{p}_ns"] = by[i].reindex(range(len(ws)), fill_value=0).to_numpy(np.int64) \
            if i in by.columns else 0
    # after the path's last point, until the window ends: the host (its marks end it),
    # device work where the device ran any
    tail_from = np.where(steps["path_end_ns"] >= 0, steps["path_end_ns"], ws)
    tail_busy = busy_within(g, sol, np.minimum(tail_from, we), we)
    steps["host_ns"] += np.maximum(we - tail_from, 0) - tail_busy
    steps["device_ns"] += tail_busy
    # the work whose end falls in a window: what a kernel's share on the path is of
    ends = (pts.n_host * 2 + pts.n_dev + np.arange(pts.n_dev)) if pts.n_dev else \
        pts.n_host + np.arange(pts.n_host)
    cp = _tables(trace, g, pts, path, amount, kind, steps, inside[ends])
    cp.unit = "range" if annotation is not None else (
        "step" if int(steps["step"].iloc[0]) >= 0 else "whole trace")
    from traceviz.analyses.timings import run_timings

    t = run_timings(trace)
    if t is not None:
        cp.timed_step_ns, cp.profiler_overhead = t.median_s * 1e9, t.profiler_overhead
        cp.overhead_text = t.overhead_text
    return cp


def _beyond_latency(g: ReplayGraph, pts: Points, path: np.ndarray, idle: np.ndarray
                    ) -> np.ndarray:
    """Per path point: of a launch edge's time with the device idle, what exceeds the
    launch latency learnt without a device's late first row (``latency_seen_ns``): queued
    work (behind work the trace does not hold), not the launch's latency."""
    kind = pts.kind[path]
    out = np.zeros(len(path), np.int64)
    at = np.flatnonzero(kind == LAUNCH)
    if g.latency_seen_ns is None or not len(at):
        return out
    _, i = pts.node(path[at])
    seen = np.zeros(len(at), np.int64)
    for dev, lat in g.latency_seen_ns.items():  # per device, few
        seen[g.d_device[i] == dev] = max(lat, 0)
    out[at] = np.maximum(idle[at] - seen, 0)
    return out


def _part_codes(kind: np.ndarray, cpu: bool) -> np.ndarray:
    """Per path point, the index of its part; on a CPU trace the work ops play the
    kernels, so their own time counts as device work (the time between them as host)."""
    lut = np.array([PARTS.index(_PART_OF[c]) for c in range(len(_PART_OF))], np.int8)
    if cpu:
        lut[HOST] = PARTS.index("device")
    return lut[kind]


def _host_dur(g: ReplayGraph, pts: Points, path: np.ndarray) -> np.ndarray:
    """Per path point: the host call's own time (for an end bound by another thread's
    call: that much of the edge is the call itself, the rest the wait)."""
    is_dev, i = pts.node(path)
    if not len(g.h_dur):
        return np.zeros(len(path), np.int64)
    return np.where(is_dev, 0, g.h_dur[np.where(is_dev, 0, i)])


def _windows(g: ReplayGraph, sol: Solution) -> pd.DataFrame:
    """The step windows of the replayed trace, one per step (the devices' windows of a
    step joined: from the earliest start to the latest end)."""
    replayed = replayed_trace(g, sol)
    work = replayed.events.loc[g.h_rows] if g.trace.is_cpu else None
    windows = analysis_windows(replayed, work)
    if not windows:
        return pd.DataFrame({"step": [-1], "start_ns": [0], "end_ns": [0]})
    w = pd.concat(windows.values())
    w = w.groupby("step", sort=False).agg(start_ns=("start_ns", "min"),
                                          end_ns=("end_ns", "max")).reset_index()
    return w.sort_values("start_ns", kind="stable").reset_index(drop=True)


def _tables(trace: Trace, g: ReplayGraph, pts: Points, path: np.ndarray, amount: np.ndarray,
            kind: np.ndarray, steps: pd.DataFrame, in_windows: np.ndarray) -> CriticalPath:
    """What lies on the path: kernels (device work on it against all their time in the
    windows), the ops that launched them, the host calls."""
    ev = trace.events
    is_dev, i = pts.node(path)
    dev_work = is_dev & (kind == DEVICE)
    rows = g.d_rows[i[dev_work]] if len(g.d_rows) else np.zeros(0, np.int64)
    on_dev = pd.DataFrame({"row": rows, "ns": amount[dev_work]})
    work = ev.loc[g.d_rows] if len(g.d_rows) else ev.loc[g.h_rows]
    if trace.is_cpu:  # the work ops are the host nodes
        host_work = ~is_dev & (kind == HOST)
        rows = g.h_rows[i[host_work]]
        on_dev = pd.DataFrame({"row": rows, "ns": amount[host_work]})
    work = work[in_windows]
    names = work["name"].astype(str)
    total = pd.DataFrame({"name": names, "category": work["category"].astype(str),
                          "dur": work["dur_ns"].to_numpy(np.int64)})
    kernels = total.groupby("name", sort=False).agg(
        category=("category", "first"), calls=("dur", "size"), total_ns=("dur", "sum"))
    on_names = ev["name"].iloc[on_dev["row"].to_numpy()].astype(str).to_numpy()
    on = pd.DataFrame({"name": on_names, "ns": on_dev["ns"].to_numpy()})
    on = on.groupby("name").agg(on_path_ns=("ns", "sum"), on_path_calls=("ns", "size"))
    kernels = kernels.join(on, how="left").fillna({"on_path_ns": 0, "on_path_calls": 0})
    kernels["on_path_ns"] = kernels["on_path_ns"].astype(np.int64)
    kernels["on_path_calls"] = kernels["on_path_calls"].astype(np.int64)
    kernels["share"] = np.where(kernels["total_ns"] > 0,
                                kernels["on_path_ns"] / kernels["total_ns"].clip(lower=1), 0.0)
    kernels = kernels.reset_index().sort_values(["on_path_ns", "total_ns"], ascending=False,
                                                kind="stable").reset_index(drop=True)
    op = on_names if trace.is_cpu else ev["op"].iloc[on_dev["row"].to_numpy()].to_numpy(object)
    ops = (pd.DataFrame({"op": pd.Series(op, dtype=object).fillna("(no op)").astype(str),
                         "on_path_ns": on_dev["ns"].to_numpy()})
           .groupby("op").sum().sort_values("on_path_ns", ascending=False).reset_index())
    host = ~is_dev & np.isin(kind, [HOST, AFTER])
    h_names = ev["name"].iloc[g.h_rows[i[host]]].astype(str).to_numpy()
    # the host time before a call is not the call's: framework ops, or nothing recorded
    gap = ~is_dev & (kind == GAP) if not trace.is_cpu else np.zeros(len(path), bool)
    in_ops = op_share(trace, g, i[gap]) * amount[gap]
    if trace.is_cpu:
        host = ~is_dev & np.isin(kind, [HOST, GAP, AFTER])
        h_names = ev["name"].iloc[g.h_rows[i[host]]].astype(str).to_numpy()
    host_calls = (pd.DataFrame({
        "name": np.concatenate([h_names, between_ops_names(trace, g.h_rows[i[gap]]),
                                np.full(int(gap.sum()), IN_OPS, object)]),
        "on_path_ns": np.concatenate([amount[host], amount[gap] - np.round(in_ops),
                                      np.round(in_ops)]).astype(np.int64)})
        .groupby("name").sum().sort_values("on_path_ns", ascending=False).reset_index())
    host_calls = host_calls[host_calls["on_path_ns"] > 0].reset_index(drop=True)
    notes = []
    if g.unexplained_rows:
        rows = "1 device row" if g.unexplained_rows == 1 else \
            f"{g.unexplained_rows:,} device rows"
        notes.append(f"{rows} waited on something the trace does not show: the recorded "
                     "delay is where the path begins there")
    return CriticalPath(steps, kernels, ops, host_calls, trace.is_cpu, notes,
                        rows=np.sort(on_dev["row"].to_numpy(np.int64)))


def _walk(pts: Points, ws: np.ndarray, we: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per point its window (``ws``/``we``, sorted and disjoint) and whether it falls in
    one; predecessors cut where they come from before the point's window; each window's
    last point; the points on the paths from those back to the windows' starts."""
    k = np.searchsorted(ws, pts.value, side="right") - 1
    inside = (k >= 0) & (pts.value <= we[np.maximum(k, 0)])
    kk = np.maximum(k, 0)
    pv = np.where(pts.pred >= 0, pts.value[np.maximum(pts.pred, 0)], NEVER)
    pred = np.where(inside & (pts.pred >= 0) & (pv >= ws[kk]), pts.pred, -1)
    cand = np.flatnonzero(inside)
    order = cand[np.lexsort((pts.value[cand], k[cand]))]
    last = order[np.r_[kk[order][1:] != kk[order][:-1], True]] if len(order) else order
    return kk, inside, pred, last, np.flatnonzero(ancestors(pred, last))


def path_of(g: ReplayGraph, sol: Solution) -> tuple[Points, np.ndarray]:
    """The replay's points and the critical path's points over every step window (for
    ``removed_from_path``)."""
    pts = binding(g, sol)
    windows = _windows(g, sol)
    *_, path = _walk(pts, windows["start_ns"].to_numpy(np.int64),
                     windows["end_ns"].to_numpy(np.int64))
    return pts, path
