"""What the device was doing while the critical path ran elsewhere: the path's time is
device time wherever the device ran work, whatever edge the chain runs through (a host
call, a launch, a wait), because a busy device was not waiting for it. Only the time the
device ran nothing is the host's, the launch's, the queue's or a wait's (docs/metrics.md,
"Critical path")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from traceviz.algos.intervals import clipped_lengths, union_blocks

if TYPE_CHECKING:  # types only
    from traceviz.analyses.replay.graph import ReplayGraph, Solution


def busy_within(g: ReplayGraph, sol: Solution, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per interval ``[a[i], b[i]]``: the time any device ran work in it, as replayed (the
    union of the live device rows)."""
    a = np.asarray(a, np.int64)
    b = np.maximum(np.asarray(b, np.int64), a)
    if not len(g.d_ts) or not len(a):
        return np.zeros(len(a), np.int64)
    live = ~g.d_removed
    bs, be = union_blocks(sol.d_start[live], sol.d_end[live])
    return clipped_lengths(a, b, bs, be)


def ended_before(g: ReplayGraph, sol: Solution) -> np.ndarray:
    """Per device row, the row of its device that ended last at or before its start, as
    replayed (-1: none): what the device was doing up to the moment the row started."""
    out = np.full(len(g.d_ts), -1, np.int64)
    live = ~g.d_removed
    for dev in np.unique(g.d_device):  # per device, few
        mine = np.flatnonzero(g.d_device == dev)
        rows = mine[live[mine]]
        order = rows[np.argsort(sol.d_end[rows], kind="stable")]
        k = np.searchsorted(sol.d_end[order], sol.d_start[mine], side="right") - 1
        found = order[np.maximum(k, 0)]
        out[mine] = np.where((k >= 0) & (found != mine), found, -1)
    return out
