"""The transforms of the scenarios that read no launch sequence: faster matrix work
(``gemm_speedup``), a faster host (``host_speedup``), no casts (``no_casts``), pointwise
kernels fused (``fuse_pointwise``). Each takes the replay graph and the scenario's factor
(0 where it takes none) and returns the changed graph and the assumptions it states (none:
nothing to change). ``scenarios.py`` names them; ``engine.py`` replays them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.analyses.replay.graph import ReplayGraph
from traceviz.analyses.whatif.stalls import startup_nodes

MATRIX_CATEGORIES = ("gemm", "rnn")


def gemm_speedup(g: ReplayGraph, x: float) -> tuple[ReplayGraph, list[str]]:
    text = (f"gemm and rnn {'ops' if g.trace.is_cpu else 'kernels'} run {x:g}x faster "
            "(what tensor cores or a better library would have to deliver); everything "
            "else as recorded")
    rows = g.h_rows if g.trace.is_cpu else g.d_rows
    mat = np.isin(g.trace.events["category"].to_numpy()[rows].astype(object),
                  MATRIX_CATEGORIES)
    if not mat.any():
        return g, []
    if g.trace.is_cpu:
        return g.with_changes(h_dur=np.where(mat, (g.h_dur / x).astype(np.int64),
                                             g.h_dur)), [text]
    return g.with_changes(d_dur=np.where(mat, (g.d_dur / x).astype(np.int64),
                                         g.d_dur)), [text]


def host_speedup(g: ReplayGraph, x: float) -> tuple[ReplayGraph, list[str]]:
    if not (g.h_gap > 0).any():
        return g, []
    gap = np.where(g.h_gap > 0, (g.h_gap / x).astype(np.int64), g.h_gap)
    if g.trace.is_cpu:
        return g.with_changes(h_gap=gap), [
            f"the host time between CPU ops (framework overhead) shrinks {x:g}x, as a "
            "compiled dispatcher would; the CPU ops keep their time"]
    return g.with_changes(h_gap=gap), [
        f"the host time between runtime calls on every thread (Python, the framework's "
        f"dispatcher) shrinks {x:g}x, as a compiled dispatcher would; the calls themselves "
        "and the device work keep their time; a thread that waited on another thread between "
        "calls is taken to be working"]


def no_casts(g: ReplayGraph, _: float) -> tuple[ReplayGraph, list[str]]:
    cast = g.trace.events["is_cast"].to_numpy()
    if not cast[g.h_rows if g.trace.is_cpu else g.d_rows].any():
        return g, []
    if g.trace.is_cpu:
        return g.with_changes(h_dur=np.where(cast[g.h_rows], 0, g.h_dur)), [
            "cast ops take no time (the ceiling of what AMP's casts cost); the framework "
            "time around them stays"]
    removed = cast[g.d_rows]
    calls = np.unique(g.d_launch[removed & (g.d_launch >= 0)])
    h_dur = g.h_dur.copy()
    h_dur[calls] = 0
    return g.with_changes(d_removed=g.d_removed | removed, h_dur=h_dur), [
        "cast kernels are removed with their launch calls (the ceiling of what AMP's casts "
        "cost); the host time of the cast ops around the launches stays"]


def _launch_order(g: ReplayGraph) -> np.ndarray:
    """Per host node: its rank among the launch calls of its chain (-1: not a launch)."""
    rank = np.full(len(g.h_ts), -1, np.int64)
    idx = np.flatnonzero(g.h_launch)
    if len(idx):
        rank[idx] = pd.Series(g.h_chain[idx]).groupby(g.h_chain[idx]).cumcount().to_numpy()
    return rank


def fuse_pointwise(g: ReplayGraph, _: float) -> tuple[ReplayGraph, list[str]]:
    ev = g.trace.events
    cat = ev["category"].to_numpy()[g.d_rows].astype(object)
    elem = (cat == "elementwise") & (g.d_launch >= 0) & ~g.d_from_start & ~g.d_removed
    li = np.maximum(g.d_launch, 0)
    chain = np.where(elem, g.h_chain[li], -1)
    order = np.where(elem, _launch_order(g)[li], -1)
    step = ev["step"].to_numpy(np.int64)[g.d_rows]
    graph_launched = elem & (pd.Series(g.d_launch).duplicated(keep=False).to_numpy())
    elem &= ~graph_launched
    # a run: consecutive rows of one stream, elementwise, launched one right after the
    # other by one thread in one step (nothing else launched between them)
    prev_ok = np.zeros(len(elem), bool)
    prev_ok[1:] = (elem[1:] & elem[:-1] & (g.d_stream[1:] == g.d_stream[:-1])
                   & (chain[1:] == chain[:-1]) & (step[1:] == step[:-1])
                   & (order[1:] == order[:-1] + 1))
    run = np.cumsum(~prev_ok)
    size = np.bincount(run)[run]
    fused = elem & (size >= 2)
    if not fused.any():
        return g, []
    k = pd.Series(size[fused])
    dur = pd.Series(g.d_dur[fused]).groupby(run[fused])
    total, longest, count = dur.transform("sum"), dur.transform("max"), k
    rule = np.maximum(longest, total * (count + 2) / (3 * count)).to_numpy()
    head = fused & ~prev_ok
    tail = fused & prev_ok
    d_dur = g.d_dur.copy()
    d_dur[fused] = np.where(head[fused], rule.astype(np.int64), g.d_dur[fused])
    calls = g.d_launch[tail]
    h_dur = g.h_dur.copy()
    h_gap = g.h_gap.copy()
    # a launch call's start-up (its kernel's module loaded) is paid by the fused kernel
    start_up = startup_nodes(g)
    calls_steady = calls[~start_up[calls]]
    h_dur[calls_steady] = 0
    h_gap[calls] = 0
    runs = int(head.sum())
    kept = len(calls) - len(calls_steady)
    return g.with_changes(d_dur=d_dur, d_removed=g.d_removed | tail, h_dur=h_dur,
                          h_gap=h_gap), [
        f"{runs} runs of consecutive elementwise kernels ({int(fused.sum())} kernels: one "
        "stream, launched one right after the other by one thread in one step) each "
        "become one kernel with one launch; the other launch calls and the host time "
        "before them go (one op dispatches)",
        "memory-traffic rule: an elementwise kernel moves 3 tensors (2 read, 1 written) at "
        "its recorded speed; a fused run of k moves k+2 (the intermediates stay in "
        "registers), so it lasts max(its longest kernel, its total x (k+2)/3k)",
        *([f"{kept} of the launch calls that go are start-up calls (modules loaded on "
           "first use): they keep their time, which the fused kernel pays too"]
          if kept else []),
    ]
