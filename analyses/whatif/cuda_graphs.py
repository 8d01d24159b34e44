"""The ``cuda_graphs`` what-if scenario: per thread and step, the launch calls between
synchronizing calls become one CUDA graph launch (``analyses/whatif/engine.py`` runs it)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.analyses.replay.graph import ReplayGraph, per_device
from traceviz.analyses.summary.launch import launch_table
from traceviz.analyses.whatif.overlap_input import input_gaps
from traceviz.analyses.whatif.stalls import startup_nodes
from traceviz.units import fmt_ns

# host cost of a graph launch per kernel it holds, where the trace has no graph launch
# to learn it from: cudaGraphLaunch under torch.profiler on an H100, median of 6 launches
# of 614-1355 kernels (sample_traces/gpu/graph_torch/train)
GRAPH_LAUNCH_PER_KERNEL_NS = 1_578


def _host_step(g: ReplayGraph) -> np.ndarray:
    return g.trace.events["step"].to_numpy(np.int64)[g.h_rows]


def _launch_cost(g: ReplayGraph) -> tuple[int, str]:
    """A graph launch's host time per kernel it holds, and where that figure comes from."""
    graph_calls = launch_table(g.trace)
    graph_calls = graph_calls[(graph_calls["population"] == "graph")
                              & (graph_calls["device_count"] > 0)]
    if len(graph_calls):
        per_kernel = int((graph_calls["host_ns"] / graph_calls["device_count"]).median())
        return per_kernel, f"learnt from this trace's {len(graph_calls)} graph launches"
    return GRAPH_LAUNCH_PER_KERNEL_NS, ("measured on an H100 (sample_traces/gpu/graph_torch), "
                                        "as this trace has no graph launch")


def _segments(g: ReplayGraph, step: np.ndarray) -> tuple[np.ndarray, pd.Series]:
    """Each host call's segment (-1: none): per thread and step, the launch calls between
    synchronizing calls; and the number of device rows of each launch call."""
    # a graph ends at a synchronizing call, and where the host waits for its next batch
    # (a data loader cannot be captured: the step asks for its input outside any graph)
    into_input = input_gaps(g)[0]
    sync = g.h_await >= 0
    cuts = sync | (into_input > 0)
    in_step = step >= 0
    key = pd.DataFrame({"chain": g.h_chain, "step": step,
                        "cut": pd.Series(cuts).groupby(g.h_chain).cumsum().to_numpy()})
    seg = key.groupby(["chain", "step", "cut"], sort=False).ngroup().to_numpy()
    seg = np.where(in_step & ~sync, seg, -1)
    # a graph launch already replays its graph: it stays as it is, outside the segments
    graph_call = np.zeros(len(seg), bool)
    multi = pd.Series(g.d_launch[g.d_launch >= 0]).value_counts()
    graph_call[multi.index[multi > 1].to_numpy(np.int64)] = True
    return np.where(graph_call, -1, seg), multi


def cuda_graphs(g: ReplayGraph, _: float) -> tuple[ReplayGraph, list[str]]:
    """The scenario's graph and the assumptions it states."""
    per_kernel, cost_source = _launch_cost(g)
    step = _host_step(g)
    seg, multi = _segments(g, step)
    launch = g.h_launch & (seg >= 0)
    if not launch.any():
        return g, []
    # from the first to the last launch call of a segment, every call and the host time
    # before it collapse into the first call: the graph launch
    s = pd.Series(np.arange(len(seg)))[launch]
    first = s.groupby(seg[launch]).min()
    last = s.groupby(seg[launch]).max()
    lo = np.full(len(seg), -1, np.int64)
    hi = np.full(len(seg), -1, np.int64)
    ok = seg >= 0
    lo[ok] = pd.Series(seg[ok]).map(first).fillna(-1).to_numpy(np.int64)
    hi[ok] = pd.Series(seg[ok]).map(last).fillna(-1).to_numpy(np.int64)
    pos = np.arange(len(seg))
    inside = (lo >= 0) & (pos > lo) & (pos <= hi)
    head = (lo >= 0) & (pos == lo)
    graph_of = np.where(inside | head, lo, -1)
    # device rows launched from a segment follow its graph launch
    launched = g.d_launch >= 0
    owner = np.where(launched, graph_of[np.maximum(g.d_launch, 0)], -1)
    in_graph = owner >= 0
    kernels = np.bincount(owner[in_graph], minlength=len(seg))
    # start-up (a module loaded at a kernel's first launch) is paid by the graph too
    start_up = startup_nodes(g) & (inside | head)
    h_dur = np.where(inside, 0, g.h_dur)
    h_dur = np.where(head, kernels * per_kernel, h_dur)
    h_dur = np.where(start_up, h_dur + g.h_dur, h_dur)
    h_gap = np.where(inside, 0, g.h_gap)
    lat = per_device(g.latency_ns, g.d_device)
    d_launch = np.where(in_graph, owner, g.d_launch)
    # a graph's kernels start while its launch call still enqueues them (as the replay
    # runs recorded graphs): from the call's start, once the call has enqueued the first
    # (its cost per kernel) and the device's launch latency has passed
    d_offset = np.where(in_graph, lat + per_kernel, g.d_offset)
    d_from_start = np.where(in_graph, True, g.d_from_start)
    d_gap, gap_text = _graph_gap(g, in_graph, multi.index[multi > 1].to_numpy(np.int64))
    n_graphs = int(head.sum())
    per_step = n_graphs / max(len(np.unique(step[head])), 1)
    return g.with_changes(h_dur=h_dur, h_gap=h_gap, d_launch=d_launch, d_offset=d_offset,
                          d_from_start=d_from_start, d_gap=d_gap), [
        f"per thread and step, the launches between synchronizing calls become one graph "
        f"launch ({n_graphs} graphs, {per_step:.1f} per step): the host time and calls "
        "between its first and last launch go (the graph replays without Python or the "
        "dispatcher)",
        f"a graph launch costs {fmt_ns(per_kernel)} of host time per kernel it holds "
        f"({cost_source})",
        *([f"{int(start_up.sum())} start-up calls inside the graphs keep their time "
           f"({fmt_ns(int(g.h_dur[start_up].sum()))}: modules loaded on first use are "
           "loaded by the graph too)"] if start_up.any() else []),
        f"the graph's first kernel starts its cost per kernel and the device's launch "
        f"latency after the call's start (the call enqueues the rest meanwhile); they run "
        f"back to back with {gap_text}, never more than the gap each "
        "kernel had as recorded; host time before the step's first launch, after its last, "
        "and synchronizing calls stay",
    ]


def _graph_gap(g: ReplayGraph, in_graph: np.ndarray, graph_calls: np.ndarray
               ) -> tuple[np.ndarray, str]:
    """The gap between a new graph's kernels: the trace's own graphs' (per device, learnt
    from their kernels), else the device's gap between queued kernels; at most the gap
    each kernel replays with now, so that removing launches never slows the device."""
    recorded = np.isin(g.d_launch, graph_calls) & (g.d_launch >= 0)
    learnt = pd.Series(g.d_gap[recorded]).groupby(g.d_device[recorded]).median()
    if len(learnt):
        own = learnt.reindex(g.d_device).to_numpy(np.float64)
        gap = np.where(np.isnan(own), g.d_gap, np.minimum(g.d_gap, np.nan_to_num(own)))
        text = "the gap of this trace's own graph kernels (" + ", ".join(
            f"{fmt_ns(v)} on device {d}" for d, v in learnt.items()) + ")"
    else:
        gap = g.d_gap
        text = "the device's gap between queued kernels (" + (", ".join(
            f"{fmt_ns(v)} on device {d}" for d, v in sorted(g.queue_gap_ns.items()))
            or "none learnt") + ")"
    return np.where(in_graph, gap, g.d_gap).astype(g.d_gap.dtype), text
