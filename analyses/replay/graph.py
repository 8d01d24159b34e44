"""Replay a trace: rebuild its dependency graph of host calls and device work, and solve
it again, as recorded or transformed (``analyses/whatif/engine.py``). Daydream's idea (USENIX
ATC'20) on traceviz's one table, where launch calls are already linked to their work.

The graph (DESIGN.md "What-if"):

- **host chains**: per host thread its outermost runtime calls in recorded order (on a
  CPU trace, its work ops); a call starts ``gap`` after the previous one ends (the host
  time between them: Python, the framework's dispatcher), the first where it was
  recorded; it lasts its recorded time, except that
- a **synchronizing call** (``launch_apis.SYNC_APIS``, or a launch call that returned only
  after its copy ended) ends ``tail`` after the device row it waited for ends: the row
  that ended last during the call in the recording;
- **device rows** per (device, stream) in recorded order; a row starts at the latest of
  its launch call's end + the device's **launch latency** (learnt: the median delay of
  rows launched onto an idle stream), the end of the previous row on its stream, and the
  end of the row it **waits on** + the device's wait latency. A wait is inferred where the
  recording shows one: a row that started later than its launch and its stream explain,
  right after a row of another stream ended (an event wait, a NCCL stream joining).
  A row whose launch is not in the trace starts where it was recorded.

Solved as a longest path by a fixed point: host chains and streams are max-plus scans
(``end_i = max(end_{i-1} + b_i, a_i)`` is a cumulative sum plus a cumulative maximum),
each pass vectorized; passes alternate until no time moves. Every edge points forward in
recorded time, so the graph has no cycle and the passes stop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.replay.stream_waits import (  # noqa: F401
    collective_floor,
    event_waits,
    inferred_waits,
    late_first_rows,
    launch_waits,
    thread_waits,
)
from traceviz.analyses.work import missing_activity, work_rows
from traceviz.errors import InputError
from traceviz.table.schema import DEVICE_KINDS

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

NEVER = np.int64(-(1 << 62))  # "no constraint" in a max
# a row started late when it started this much later than its launch (with the learnt
# latency) and its stream explain: it waited on another stream when it started within
# WAIT_WINDOW_NS of a row of another stream ending, else on something the trace does not
# show (a host event, a graph's internal edge), and keeps its recorded delay
WAIT_SLACK_NS = 10_000
MAX_PASSES = 20_000


@dataclass(frozen=True)
class ReplayGraph:
    """The graph as arrays. Host nodes sorted by (chain, recorded start); device rows by
    (stream key, recorded start). Scenarios change copies of the editable arrays."""

    trace: Trace
    # host nodes
    h_rows: np.ndarray       # index into trace.events
    h_chain: np.ndarray      # chain id (contiguous)
    h_ts: np.ndarray
    h_dur: np.ndarray        # the call's own time (a call that waited: its tail)
    h_end_rec: np.ndarray    # recorded end
    h_gap: np.ndarray        # recorded start - previous end in the chain (first: 0)
    h_first: np.ndarray      # bool: first of its chain
    h_await: np.ndarray      # device row index the call waited for, -1
    h_tail: np.ndarray       # call end - awaited row end
    h_launch: np.ndarray     # bool: a launch call
    h_after: np.ndarray      # host node of another thread this one waited for, -1
    h_after_lat: np.ndarray  # its start - that node's end
    # device rows
    d_rows: np.ndarray
    d_stream: np.ndarray     # (device, stream) id, contiguous
    d_device: np.ndarray
    d_ts: np.ndarray
    d_dur: np.ndarray
    d_launch: np.ndarray     # host node that launched it, -1
    d_from_start: np.ndarray  # bool: ready relative to the call's start (synchronous copy)
    d_offset: np.ndarray     # ready = launch end (or start) + offset
    d_dep: np.ndarray        # device row it waits on, -1
    d_dep_lat: np.ndarray
    d_removed: np.ndarray    # bool: a scenario removed it
    d_gap: np.ndarray        # the device's gap after the previous row of the stream
    latency_ns: dict[int, int]     # per device: launch latency learnt
    queue_gap_ns: dict[int, int]   # per device: gap between queued rows learnt
    wait_latency_ns: dict[int, int]
    unexplained_rows: int    # rows that started late with no wait found
    unexplained_ns: int
    event_waits: int = 0     # rows that wait on another stream by a recorded event wait
    d_unseen: np.ndarray | None = None  # waited on the unseen: lost, or late_first_rows
    latency_seen_ns: dict[int, int] | None = None  # latency_ns without late first rows
    # per device row, the earliest it may start (NEVER: no floor): a collective starts no
    # earlier than recorded, so it ends no earlier than the other ranks let it
    d_not_before: np.ndarray | None = None

    def with_changes(self, **arrays: Any) -> ReplayGraph:
        return replace(self, **arrays)


@dataclass(frozen=True)
class Solution:
    h_start: np.ndarray
    h_end: np.ndarray
    d_start: np.ndarray
    d_end: np.ndarray
    passes: int


def _group_starts(ids: np.ndarray) -> np.ndarray:
    """bool: first element of each run of equal ids (ids contiguous)."""
    first = np.ones(len(ids), bool)
    first[1:] = ids[1:] != ids[:-1]
    return first


def _grouped_cumsum(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    c = np.cumsum(values)
    start = np.maximum.accumulate(np.where(first, np.arange(len(values)), 0))
    return c - (c[start] - values[start]) if len(values) else c


def _grouped_cummax(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return pd.Series(values).groupby(ids, sort=False).cummax().to_numpy(np.int64)


def _replayed_rows(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The host's rows (runtime calls; a CPU trace's work ops) by thread and time, and the
    device's by stream and time."""
    ev = trace.events
    if activity := missing_activity(trace):  # the device's side is not in the trace
        raise InputError(f"nothing to replay: {activity}")
    if trace.is_cpu:
        host = work_rows(trace)
        dev = ev.iloc[0:0]
    else:
        host = _outermost(ev[ev["kind"] == "runtime"])
        dev = ev[ev["kind"].isin(DEVICE_KINDS)]
    if host.empty and dev.empty:
        raise InputError("nothing to replay: the trace has no runtime calls, device rows "
                         "or framework ops")
    return (host.sort_values(["pid", "tid", "ts_ns"], kind="stable"),
            dev.sort_values(["device", "stream", "ts_ns"], kind="stable"))


def _launch_latency(d_ts: np.ndarray, d_device: np.ndarray, d_launch: np.ndarray,
                    async_launch: np.ndarray, stream_idle: np.ndarray, delay: np.ndarray
                    ) -> tuple[dict[int, int], dict[int, int], np.ndarray]:
    """The launch latency per device: rows launched onto an idle stream, one per launch
    call; the same without a device's late first row (what the critical path counts as
    launch latency), and those rows."""
    first_of_launch = (d_launch >= 0) & ~pd.Series(d_launch).duplicated().to_numpy()
    idle_at_launch = first_of_launch & async_launch & stream_idle
    latency = _typical_by(d_device[idle_at_launch], delay[idle_at_launch])
    late_first = late_first_rows(d_ts, d_device, async_launch, delay > WAIT_SLACK_NS)
    seen = idle_at_launch & ~late_first
    return latency, _typical_by(d_device[seen], delay[seen]), late_first


def _wait_latency(d_dep: np.ndarray, event_dep: np.ndarray, d_device: np.ndarray,
                  d_ts: np.ndarray, d_end: np.ndarray, lat: np.ndarray
                  ) -> tuple[np.ndarray, dict[int, int]]:
    """Each wait's latency, and their median per device."""
    found = d_dep >= 0
    # each wait keeps its recorded latency (an inferred one up to WAIT_WINDOW_NS): the
    # edge is learnt from this one recording, there is no population to average
    d_dep_lat = np.where(found, d_ts - d_end[np.maximum(d_dep, 0)], 0)
    # a recorded event wait's row may have started late for its launch, not the event:
    # the edge itself costs at most the device's launch latency
    d_dep_lat = np.where(event_dep >= 0, np.minimum(d_dep_lat, np.maximum(lat, 0)), d_dep_lat)
    return d_dep_lat, _median_by(d_device[found], d_dep_lat[found])


def build(trace: Trace) -> ReplayGraph:
    """The replay graph of a trace (GPU: runtime calls and device rows; CPU: work ops)."""
    host, dev = _replayed_rows(trace)
    h_ts = host["ts_ns"].to_numpy(np.int64)
    h_dur = host["dur_ns"].to_numpy(np.int64)
    h_chain = host.groupby(["pid", "tid"], sort=False).ngroup().to_numpy(np.int64)
    h_first = _group_starts(h_chain)
    prev_end = np.roll(h_ts + h_dur, 1)
    h_gap = np.where(h_first, 0, h_ts - prev_end)
    h_launch = host["launch_id"].to_numpy(np.int64) >= 0
    d_ts = dev["ts_ns"].to_numpy(np.int64)
    d_dur = dev["dur_ns"].to_numpy(np.int64)
    d_device = dev["device"].to_numpy(np.int64)
    d_stream = dev.groupby(["device", "stream"], sort=False).ngroup().to_numpy(np.int64)
    pos = pd.Series(np.arange(len(host)), index=host["launch_id"].to_numpy(np.int64))
    pos = pos[pos.index >= 0]
    pos = pos[~pos.index.duplicated()]
    d_launch = (pd.Series(dev["launch_id"].to_numpy(np.int64)).map(pos)
                .fillna(-1).to_numpy(np.int64))
    d_end = d_ts + d_dur
    launched = d_launch >= 0
    sync_launch, graph, h_await, h_tail = launch_waits(host, h_ts, h_dur, dev, d_launch,
                                                       d_end)
    h_after = thread_waits(host["pid"].to_numpy(np.int64), h_chain, h_ts, h_dur, h_gap,
                           WAIT_SLACK_NS)
    h_after_lat = np.where(h_after >= 0, h_ts - (h_ts + h_dur)[np.maximum(h_after, 0)], 0)
    h_gap = np.where(h_after >= 0, 0, h_gap)
    h_end_rec = h_ts + h_dur
    # a call that waited costs only its tail of its own: the rest was the wait
    h_dur = np.where(h_await >= 0, np.minimum(h_dur, h_tail), h_dur)

    d_first = _group_starts(d_stream)
    prev_dev_end = np.where(d_first, NEVER, np.roll(d_end, 1))
    call_start = _of_launch(h_ts, d_launch)
    call_end = np.where(launched, call_start + _of_launch(h_dur, d_launch), NEVER)
    delay = d_ts - call_end
    latency, latency_seen, late_first = _launch_latency(
        d_ts, d_device, d_launch, launched & ~sync_launch, prev_dev_end <= call_end, delay)
    lat = per_device(latency, d_device)
    d_offset = np.where(sync_launch, d_ts - call_start, lat)
    if graph.any():  # the delay of the graph's first kernel, for all of them
        d_offset[graph] = (pd.Series(d_offset[graph]).groupby(d_launch[graph])
                           .transform("min").to_numpy())

    # a device leaves a small gap between rows of a stream even when the next one was
    # already launched (its own per-row cost): learnt from rows that were queued
    queued = launched & ~sync_launch & ~d_first & (call_end + lat < prev_dev_end)
    gaps = _typical_by(d_device[queued], (d_ts - prev_dev_end)[queued])
    gap = per_device(gaps, d_device)
    # a graph's kernels follow each other with the graph's own gap
    inside = graph & ~d_first & (np.roll(d_launch, 1) == d_launch)
    graph_gaps = _typical_by(d_device[inside], (d_ts - prev_dev_end)[inside])
    gap = np.where(graph, per_device(graph_gaps, d_device), gap)
    explained = np.maximum(prev_dev_end + gap, np.where(launched, call_end + lat, NEVER))
    late = launched & ~sync_launch & (d_ts - explained > WAIT_SLACK_NS)
    d_dep = inferred_waits(d_device, d_stream, d_ts, d_end, late, explained)
    # an event wait the host recorded (cudaStreamWaitEvent after cudaEventRecord) is the
    # dependency itself: it replaces an inferred one
    event_dep = event_waits(host, h_chain, d_launch, d_stream, d_ts, d_end)
    d_dep = np.where(event_dep >= 0, event_dep, d_dep)
    d_dep_lat, wait_lat = _wait_latency(d_dep, event_dep, d_device, d_ts, d_end, lat)
    lost = late & (d_dep < 0)
    d_offset = np.where(lost, delay, d_offset)
    return ReplayGraph(
        trace=trace,
        h_rows=host.index.to_numpy(), h_chain=h_chain, h_ts=h_ts, h_dur=h_dur,
        h_end_rec=h_end_rec, h_gap=h_gap,
        h_first=h_first, h_await=h_await, h_tail=h_tail, h_launch=h_launch,
        h_after=h_after, h_after_lat=h_after_lat,
        d_rows=dev.index.to_numpy(), d_stream=d_stream, d_device=d_device, d_ts=d_ts,
        d_dur=d_dur, d_launch=d_launch, d_from_start=sync_launch, d_offset=d_offset,
        d_dep=d_dep, d_dep_lat=d_dep_lat, d_removed=np.zeros(len(dev), bool),
        d_gap=gap, latency_ns=latency, queue_gap_ns=gaps, wait_latency_ns=wait_lat,
        event_waits=int((event_dep >= 0).sum()),
        d_unseen=lost | late_first, latency_seen_ns=latency_seen,
        d_not_before=collective_floor(dev, d_ts, NEVER),
        unexplained_rows=int(lost.sum()),
        unexplained_ns=int((d_ts - explained)[lost].sum()),
    )


def per_device(values: dict[int, int], device: np.ndarray) -> np.ndarray:
    """``values[device]`` for every row (0 for a device without a value)."""
    out = np.zeros(len(device), np.int64)
    for d, v in values.items():  # per device, few
        out[device == d] = v
    return out


def _of_launch(values: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """Per device row, the value of its launch call (0 where it has none; a trace may
    hold device rows and no call at all)."""
    if len(values) == 0:
        return np.zeros(len(launch), np.int64)
    return values[np.maximum(launch, 0)]


def _outermost(rt: pd.DataFrame) -> pd.DataFrame:
    """Runtime calls not inside another call of their thread (nsys records a
    ``cudaMemcpy`` around its ``cudaMemcpy_v3020``: one call)."""
    rt = rt.sort_values(["pid", "tid", "ts_ns", "dur_ns"], ascending=[True, True, True, False],
                        kind="stable")
    end = (rt["ts_ns"] + rt["dur_ns"]).to_numpy(np.int64)
    thread = rt.groupby(["pid", "tid"], sort=False).ngroup().to_numpy(np.int64)
    before = np.roll(_grouped_cummax(end, thread), 1)
    inside = ~_group_starts(thread) & (end <= before)
    return rt[~inside]


def _median_by(keys: np.ndarray, values: np.ndarray) -> dict[int, int]:
    if len(keys) == 0:
        return {}
    med = pd.Series(values).groupby(keys).median()
    return {int(k): int(round(v)) for k, v in med.items()}


def _typical_by(keys: np.ndarray, values: np.ndarray) -> dict[int, int]:
    """Per key the mean of the values within WAIT_SLACK_NS of their median: the mean,
    not the median, so that a launch-bound stretch replays as long as it was (delays are
    skewed); the late ones beyond the slack are waits, modelled apart."""
    if len(keys) == 0:
        return {}
    s = pd.Series(values)
    med = s.groupby(keys).transform("median")
    near = (s - med).abs() <= WAIT_SLACK_NS
    mean = s[near].groupby(keys[near.to_numpy()]).mean()
    return {int(k): int(round(v)) for k, v in mean.items()}


def solve(g: ReplayGraph) -> Solution:
    """Start and end of every host node and device row in the replay."""
    h_ids, d_ids = g.h_chain, g.d_stream
    h_first = g.h_first
    d_first = _group_starts(d_ids)
    # b_i: what call i adds after the previous end; the first starts where recorded
    b = np.where(h_first, g.h_ts, g.h_gap) + g.h_dur
    big_b = _grouped_cumsum(b, h_first)
    d_dur = np.where(g.d_removed, 0, g.d_dur)
    # start = max(previous end + gap, ready): the same scan over durations + gap
    step = np.where(g.d_removed, 0, d_dur + g.d_gap)
    big_d = _grouped_cumsum(step, d_first)
    d_end = np.full(len(g.d_ts), NEVER)
    has_await = g.h_await >= 0
    has_after = g.h_after >= 0
    h_end = np.full(len(b), NEVER)
    launched = g.d_launch >= 0
    li = np.maximum(g.d_launch, 0)
    has_dep = g.d_dep >= 0
    anchored = np.where(launched | g.d_removed, NEVER, g.d_ts)
    prev = None
    # each pass fixes at least one more node of every dependency path, and a path visits a
    # node once: without a cycle the values settle within a pass per node (plus one to see
    # it); with one they grow for ever, and a small input says so at once
    limit = min(MAX_PASSES, len(b) + len(d_dur) + 2)
    for passes in range(1, limit + 1):
        a = np.full(len(b), NEVER)
        a[has_await] = d_end[g.h_await[has_await]] + g.h_tail[has_await]
        if has_after.any():  # start no earlier than the other thread's call allows
            a[has_after] = np.maximum(a[has_after], h_end[g.h_after[has_after]]
                                      + g.h_after_lat[has_after] + g.h_dur[has_after])
        y = _grouped_cummax(np.maximum(a - big_b, 0), h_ids) if len(b) else a
        h_end = big_b + y
        h_start = np.where(h_first, g.h_ts, np.roll(h_end, 1) + g.h_gap)
        ready = anchored.copy()
        base = np.where(g.d_from_start, _of_launch(h_start, li), _of_launch(h_end, li))
        ready = np.where(launched & ~g.d_removed, base + g.d_offset, ready)
        dep_ready = np.where(has_dep, d_end[np.maximum(g.d_dep, 0)] + g.d_dep_lat, NEVER)
        ready = np.maximum(ready, np.where(g.d_removed, NEVER, dep_ready))
        if g.d_not_before is not None:
            ready = np.maximum(ready, np.where(g.d_removed, NEVER, g.d_not_before))
        z = _grouped_cummax(ready - (big_d - step), d_ids) if len(d_dur) else ready
        new_end = big_d + z - np.where(g.d_removed, 0, g.d_gap)
        if prev is not None and np.array_equal(prev[0], h_end) \
                and np.array_equal(prev[1], new_end):
            return Solution(h_start, h_end, new_end - d_dur, new_end, passes)
        prev = (h_end, new_end)
        d_end = new_end
    raise InputError(f"the replay did not settle in {limit:,} passes (a dependency cycle?)")
