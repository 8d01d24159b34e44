"""Who waits for whom, for the replay (``graph.py``): a device row on a row of another
stream (recorded event waits, and waits inferred from a late start), a host call on the
device rows it launched or synchronized with, a thread on another's call."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.table.launch_apis import event_role, is_sync_call

# a late row (replay.WAIT_SLACK_NS) waited on another stream when it started within
# WAIT_WINDOW_NS of a row of another stream ending
WAIT_WINDOW_NS = 50_000


def wait_calls(names: pd.Series) -> int:
    """How many of ``names`` are stream-wait calls (cudaStreamWaitEvent and kin)."""
    return int((event_roles(names) == "wait").sum())


def event_roles(names: pd.Series) -> np.ndarray:
    """Per name: ``record``, ``wait``, ``query`` (``launch_apis.event_role``) or ``""``."""
    return per_distinct(names, lambda c: np.array([event_role(str(n)) or "" for n in c],
                                                  dtype=object), fill="")


def event_waits(host: pd.DataFrame, h_chain: np.ndarray, d_launch: np.ndarray,
                 d_stream: np.ndarray, d_ts: np.ndarray, d_end: np.ndarray) -> np.ndarray:
    """Per device row: the row it waits on by an event wait the host recorded, -1.

    Neither Kineto nor XSpace records which stream an event call names, so the calls'
    order on their thread does: an event record marks the last row the thread launched
    before it (torch records on the stream it just used); a stream wait takes the last
    record before it on the thread, and holds back the first row the thread launches
    after it. An edge that the recording contradicts (the row started before the
    recorded row ended; both on one stream, where stream order holds already) is left
    out."""
    dep = np.full(len(d_ts), -1, np.int64)
    role = event_roles(host["name"])
    if not (role == "wait").any() or not len(d_ts):
        return dep
    n = len(host)
    launched = np.flatnonzero(d_launch >= 0)
    # per host node, the first (and last) device row it launched, by start
    order = launched[np.argsort(d_ts[launched], kind="stable")]
    first_row = np.full(n, -1, np.int64)
    last_row = np.full(n, -1, np.int64)
    first_row[d_launch[order[::-1]]] = order[::-1]
    last_row[d_launch[order]] = order
    chain = pd.Series(h_chain)
    last_before = pd.Series(np.where(last_row >= 0, last_row, np.nan)).groupby(chain).ffill()
    record_idx = np.where(role == "record", np.arange(n), -1).astype(float)
    record_idx[record_idx < 0] = np.nan
    record_before = pd.Series(record_idx).groupby(chain).ffill()
    # the first row launched strictly after the node, on its chain
    nxt = pd.Series(np.where(first_row >= 0, first_row, np.nan)).groupby(chain).bfill()
    after = nxt.groupby(chain).shift(-1)
    waits = np.flatnonzero(role == "wait")
    rec = record_before.to_numpy()[waits]
    target = after.to_numpy()[waits]
    ok = ~np.isnan(rec) & ~np.isnan(target)
    waits, rec, target = waits[ok], rec[ok].astype(np.int64), target[ok].astype(np.int64)
    src = last_before.to_numpy()[rec]
    ok = ~np.isnan(src)
    src, target = src[ok].astype(np.int64), target[ok]
    real = (d_stream[src] != d_stream[target]) & (d_ts[target] >= d_end[src])
    dep[target[real]] = src[real]
    return dep


def inferred_waits(d_device: np.ndarray, d_stream: np.ndarray, d_ts: np.ndarray,
                    d_end: np.ndarray, late: np.ndarray, explained: np.ndarray) -> np.ndarray:
    """For each late row: the row of another stream of its device that ended last before
    it started, if that end explains the start (after what launch and stream explain,
    within WAIT_WINDOW_NS of the start)."""
    dep = np.full(len(d_ts), -1, np.int64)
    for s in np.unique(d_stream[late]):  # per stream, few
        mine = np.flatnonzero(late & (d_stream == s))
        device = d_device[mine[0]]
        others = np.flatnonzero((d_device == device) & (d_stream != s))
        if len(others) == 0:
            continue
        order = others[np.argsort(d_end[others], kind="stable")]
        ends = d_end[order]
        k = np.searchsorted(ends, d_ts[mine], side="right") - 1
        cand = order[np.maximum(k, 0)]
        ok = (k >= 0) & (d_end[cand] >= explained[mine]) \
            & (d_ts[mine] - d_end[cand] <= WAIT_WINDOW_NS)
        dep[mine[ok]] = cand[ok]
    return dep


def late_first_rows(d_ts: np.ndarray, d_device: np.ndarray, launched: np.ndarray,
                    late: np.ndarray) -> np.ndarray:
    """A device's first recorded row, launched and late for its launch: the device may have
    been busy with work the trace does not hold (a graph replayed before the profiler
    started). The replay keeps its delay (it may be all the latency there is to learn);
    the critical path counts it as queued, not as launch latency."""
    start = pd.Series(d_ts).groupby(d_device).transform("min").to_numpy(np.int64)
    return (d_ts == start) & launched & late


def thread_waits(pid: np.ndarray, chain: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                 gap: np.ndarray, slack: int) -> np.ndarray:
    """A thread that stood still (a gap over ``slack``) while another thread of its
    process made calls waited for that thread (PyTorch: the autograd thread for the
    main thread's backward call, the main thread for the backward to finish): the call
    ending last in the gap is what it waited for."""
    after = np.full(len(ts), -1, np.int64)
    end = ts + dur
    for c in np.unique(chain):  # per thread, few
        mine = np.flatnonzero((chain == c) & (gap > slack))
        if len(mine) == 0:
            continue
        others = np.flatnonzero((pid == pid[mine[0]]) & (chain != c))
        if len(others) == 0:
            continue
        order = others[np.argsort(end[others], kind="stable")]
        k = np.searchsorted(end[order], ts[mine], side="right") - 1
        cand = order[np.maximum(k, 0)]
        ok = (k >= 0) & (end[cand] > ts[mine] - gap[mine])
        after[mine[ok]] = cand[ok]
    return after


def collective_floor(dev: pd.DataFrame, d_ts: np.ndarray, never: np.int64
                     ) -> np.ndarray | None:
    """A collective kernel is a synchronization point with the other ranks: it ends when
    the last of them arrives. The replay keeps the others as recorded, so the kernel
    starts no earlier than it did and ends no earlier (this rank arriving sooner waits
    longer); None where the trace has no collective."""
    comm = ((dev["kind"] == "kernel") & (dev["category"] == "communication")).to_numpy()
    return np.where(comm, d_ts, never) if comm.any() else None


def launch_waits(host: pd.DataFrame, h_ts: np.ndarray, h_dur: np.ndarray,
                 dev: pd.DataFrame, d_launch: np.ndarray, d_end: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Device rows that follow their launch call's start (``sync_launch``), those of a
    graph launch, and each host call's awaited row (-1: none) with its own tail after it.

    Rows that ended before their launch call returned: a synchronous copy (the call
    waited for it), or a short kernel / a graph's kernels (the call was still busy): they
    follow the call's start as recorded; only a copy makes its call wait. A graph
    launch's kernels start while the call still enqueues them: from the call's start, by
    the delay of the graph's first kernel, then in stream order with the graph's own gap
    between kernels. A synchronize call waits for a row too."""
    h_await = np.full(len(host), -1, np.int64)
    h_tail = np.zeros(len(host), np.int64)
    launched = d_launch >= 0
    d_dur = dev["dur_ns"].to_numpy(np.int64)
    copy = (dev["kind"] != "kernel").to_numpy()
    sync_launch = np.zeros(len(dev), bool)
    sync_launch[launched] = (h_ts[d_launch[launched]] + h_dur[d_launch[launched]]
                             >= d_end[launched]) & (d_dur[launched] > 0)
    graph = launched & pd.Series(d_launch).duplicated(keep=False).to_numpy()
    sync_launch |= graph
    copies = np.flatnonzero(sync_launch & copy & ~graph)
    if len(copies):  # per call, the copy that ended last
        last = pd.Series(d_end[copies], index=copies).groupby(d_launch[copies]).idxmax()
        h_await[last.index.to_numpy(np.int64)] = last.to_numpy(np.int64)
    has = h_await >= 0
    h_tail[has] = h_ts[has] + h_dur[has] - d_end[h_await[has]]
    _awaited_by_sync_calls(host, h_ts, h_dur, h_await, h_tail, dev, d_end, d_launch)
    return sync_launch, graph, h_await, h_tail


def _awaited_by_sync_calls(host: pd.DataFrame, h_ts: np.ndarray, h_dur: np.ndarray,
                           h_await: np.ndarray, h_tail: np.ndarray, dev: pd.DataFrame,
                           d_end: np.ndarray, d_launch: np.ndarray) -> None:
    """A synchronize call waited for the row of its process that ended last during it
    (none ended: the device was done before the call; it keeps its recorded time)."""
    if dev.empty or host.empty:
        return
    sync = per_distinct(host["name"], each(is_sync_call)).astype(bool)
    if not sync.any():
        return
    h_pid = host["pid"].to_numpy(np.int64)
    d_pid = np.where(d_launch >= 0, h_pid[np.maximum(d_launch, 0)], -1)
    for pid in np.unique(h_pid[sync]):  # per process, few
        calls = np.flatnonzero(sync & (h_pid == pid))
        rows = np.flatnonzero((d_pid == pid) | (d_pid < 0))
        order = rows[np.argsort(d_end[rows], kind="stable")]
        ends = d_end[order]
        call_end = h_ts[calls] + h_dur[calls]
        k = np.searchsorted(ends, call_end, side="right") - 1
        ok = (k >= 0) & (ends[np.maximum(k, 0)] > h_ts[calls])
        h_await[calls[ok]] = order[k[ok]]
        h_tail[calls[ok]] = call_end[ok] - ends[k[ok]]
