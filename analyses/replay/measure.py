"""The replayed trace and its windows: the solved graph (``replay.py``) written back as an
events table, step marks moved along their timeline, and measured with the trace's own
windows, so a replay and a scenario are measured like the recording."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.algos.intervals import union_in_windows
from traceviz.analyses.replay.graph import ReplayGraph, Solution
from traceviz.analyses.work import analysis_windows, work_rows

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace


def replayed_trace(g: ReplayGraph, sol: Solution) -> Trace:
    """The trace with its host calls, device rows and step marks moved to their replayed
    times (rows a scenario removed dropped), for the usual window arithmetic."""
    ev = g.trace.events.copy()
    ts = ev["ts_ns"].to_numpy(np.int64).copy()
    dur = ev["dur_ns"].to_numpy(np.int64).copy()
    ts[g.h_rows] = sol.h_start
    dur[g.h_rows] = sol.h_end - sol.h_start
    ts[g.d_rows] = sol.d_start
    dur[g.d_rows] = sol.d_end - sol.d_start
    steps = np.flatnonzero(ev["kind"].to_numpy() == "step")
    if len(steps):
        start, end = moved_marks(g, sol, ev.iloc[steps])
        ts[steps] = start
        dur[steps] = np.maximum(end - start, 0)
    ev["ts_ns"] = ts
    ev["dur_ns"] = dur
    launched = g.d_launch >= 0
    ev.loc[g.d_rows[launched], "launch_ts_ns"] = sol.h_start[g.d_launch[launched]]
    drop = g.d_rows[g.d_removed]
    if len(drop):
        ev = ev.drop(index=drop)
    return replace(g.trace, events=ev, meta=g.trace.meta.copy())


def moved_marks(g: ReplayGraph, sol: Solution, marks: pd.DataFrame
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Step marks follow the timeline they sit on: a host mark the calls of its thread
    (else of its process' busiest thread), a device mark the rows of its device. A mark
    keeps its distance to the next node after it (its start) and to the last node
    before it (its end)."""
    start = marks["ts_ns"].to_numpy(np.int64).copy()
    end = start + marks["dur_ns"].to_numpy(np.int64)
    new_start, new_end = start.copy(), end.copy()
    h_pid = g.trace.events["pid"].to_numpy(np.int64)[g.h_rows]
    h_tid = g.trace.events["tid"].to_numpy(np.int64)[g.h_rows]
    for key, idx in marks.groupby(["device", "pid", "tid"], sort=False).indices.items():
        device, pid, tid = (int(k) for k in key)
        if device >= 0:
            nodes = np.flatnonzero(g.d_device == device)
            old_s, old_e, s, e = g.d_ts, g.d_ts + g.d_dur, sol.d_start, sol.d_end
        else:
            nodes = np.flatnonzero((h_pid == pid) & (h_tid == tid))
            if len(nodes) == 0:
                mine = np.flatnonzero(h_pid == pid)
                if len(mine):
                    busiest = np.bincount(g.h_chain[mine]).argmax()
                    nodes = np.flatnonzero(g.h_chain == busiest)
            old_s, old_e, s, e = g.h_ts, g.h_end_rec, sol.h_start, sol.h_end
        if len(nodes) == 0:
            continue
        nodes = nodes[np.argsort(old_s[nodes], kind="stable")]
        new_start[idx] = _follow(start[idx], old_s[nodes], s[nodes], old_e[nodes], e[nodes])
        new_end[idx] = _follow(end[idx], old_s[nodes], s[nodes], old_e[nodes], e[nodes],
                               after=False)
    return new_start, np.maximum(new_end, new_start)


def _follow(t: np.ndarray, old_s: np.ndarray, new_s: np.ndarray, old_e: np.ndarray,
            new_e: np.ndarray, after: bool = True) -> np.ndarray:
    if after:  # keep the distance to the next node's start
        k = np.searchsorted(old_s, t, side="left")
        inside = k < len(old_s)
        kk = np.minimum(k, len(old_s) - 1)
        return np.where(inside, new_s[kk] - (old_s[kk] - t),
                        t + (new_e[-1] - old_e[-1]))
    # keep the distance to the last node ending before it (ends are not sorted: the
    # running maximum of ends up to each start is)
    run_e = np.maximum.accumulate(old_e)
    run_new = np.maximum.accumulate(new_e)
    k = np.searchsorted(run_e, t, side="right") - 1
    return np.where(k >= 0, run_new[np.maximum(k, 0)] + (t - run_e[np.maximum(k, 0)]),
                    new_s[0] - (old_s[0] - t))


@dataclass(frozen=True)
class Windows:
    """Window time of a trace: summed over devices, and per step (summed over devices)."""

    span_ns: int
    per_step: pd.Series  # step -> ns; empty without steps
    devices: int = 1     # devices whose windows are summed
    busy_ns: int = 0     # union of work inside the windows, summed over devices


def window_time(trace: Trace, work_index: np.ndarray | None = None,
                windows: dict[int, pd.DataFrame] | None = None) -> Windows:
    """``work_index``: the rows doing the work, where moving ops would change which
    ops a CPU trace's op tree calls work; ``windows``: the trace's analysis windows where
    the caller has them (computed here when not given)."""
    work = None if work_index is None else trace.events.loc[work_index]
    windows = analysis_windows(trace, work) if windows is None else windows
    if not windows:
        return Windows(0, pd.Series(dtype=np.int64))
    w = pd.concat(windows.values())
    length = (w["end_ns"] - w["start_ns"]).clip(lower=0)
    per_step = length[w["step"] >= 0].groupby(w["step"][w["step"] >= 0]).sum()
    work = work_rows(trace) if work is None else work
    busy = 0
    dev = work["device"].to_numpy(np.int64)
    ts = work["ts_ns"].to_numpy(np.int64)
    end = ts + work["dur_ns"].to_numpy(np.int64)
    for device, win in windows.items():
        mine = dev == device
        busy += int(union_in_windows(ts[mine], end[mine], win["start_ns"].to_numpy(np.int64),
                                     win["end_ns"].to_numpy(np.int64)).sum())
    return Windows(int(length.sum()), per_step.astype(np.int64), len(windows), busy)
