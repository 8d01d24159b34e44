"""The ``overlap_input`` what-if scenario: the input pipeline prepares every batch beside
the step (DataLoader workers, tf.data prefetch), so the call that asks for the next batch
returns at once. And ``input_gaps``, which the other scenarios read so that none of them
claims the time the step waits for its input (a CUDA graph cannot capture a data loader).
"""

from __future__ import annotations

import numpy as np

from traceviz.algos.intervals import covered_until, union_blocks
from traceviz.algos.optree import thread_key
from traceviz.analyses.replay.graph import ReplayGraph
from traceviz.table.input_calls import input_range_mask
from traceviz.units import fmt_ns, plural


def input_gaps(g: ReplayGraph) -> tuple[np.ndarray, np.ndarray]:
    """Per host node: the part of the host time before it (its gap) that lies inside an
    input call on its own thread, and whether the node itself starts inside one."""
    ev = g.trace.events
    mask = input_range_mask(ev)
    removed = np.zeros(len(g.h_ts), np.int64)
    inside = np.zeros(len(g.h_ts), bool)
    if not mask.any() or not len(g.h_ts):
        return removed, inside
    rows = ev[mask]
    r_thread = thread_key(rows["pid"].to_numpy(np.int64), rows["tid"].to_numpy(np.int64))
    pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    h_thread = thread_key(pid[g.h_rows], tid[g.h_rows])
    r_ts = rows["ts_ns"].to_numpy(np.int64)
    r_end = r_ts + rows["dur_ns"].to_numpy(np.int64)
    for t in np.unique(r_thread):  # the threads that ask for batches: one or two
        bs, be = union_blocks(r_ts[r_thread == t], r_end[r_thread == t])
        mine = np.flatnonzero(h_thread == t)
        gap = np.maximum(g.h_gap[mine], 0)
        start = g.h_ts[mine]
        removed[mine] = covered_until(bs, be, start) - covered_until(bs, be, start - gap)
        k = np.searchsorted(bs, start, side="right") - 1
        inside[mine] = (k >= 0) & (start < be[np.maximum(k, 0)])
    return removed, inside


def overlap_input(g: ReplayGraph, _: float) -> tuple[ReplayGraph, list[str]]:
    removed, inside = input_gaps(g)
    if not removed.any() and not (g.trace.is_cpu and inside.any()):
        return g, []
    h_gap = g.h_gap - removed
    text = [f"the next batch is ready when the step asks for it (loader workers or "
            f"prefetching prepare it beside the step): the host time inside the input "
            f"calls goes ({fmt_ns(int(removed.sum()))} between calls)"]
    if g.trace.is_cpu:
        # the loader's own ops (decoding, collation) move to the workers too
        h_dur = np.where(inside, 0, g.h_dur)
        text.append(f"the {plural(int(inside.sum()), 'work op')} inside the input calls "
                    "move to the loader's workers (other cores)")
        return g.with_changes(h_gap=h_gap, h_dur=h_dur), text
    text.append("runtime calls made inside the input calls (copies of the batch) keep "
                "their time")
    return g.with_changes(h_gap=h_gap), text
