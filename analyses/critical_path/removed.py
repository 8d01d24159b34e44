"""What a what-if scenario takes off the critical path: the weight each edge of the path
loses under the scenario's graph (``whatif`` holds its saving against it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from traceviz.analyses.critical_path.path import (
    AFTER,
    AWAIT,
    DEP,
    DEVICE,
    GAP,
    GRAPH,
    HOST,
    LAUNCH,
    QUEUE,
    Points,
)

if TYPE_CHECKING:  # types only
    from traceviz.analyses.replay.graph import ReplayGraph


def _weights(g: ReplayGraph, pts: Points, path: np.ndarray) -> np.ndarray:
    """Each path point's edge weight under graph ``g`` (its own arrays: a scenario's)."""
    is_dev, i = pts.node(path)
    kind = pts.kind[path]
    hi = np.where(is_dev, 0, i)
    di = np.where(is_dev, i, 0)
    h = len(g.h_dur) > 0
    d = len(g.d_dur) > 0

    def host(a: np.ndarray) -> np.ndarray:
        return a[hi] if h else np.zeros(len(path), np.int64)

    def dev(a: np.ndarray) -> np.ndarray:
        return a[di] if d else np.zeros(len(path), np.int64)

    removed = dev(g.d_removed.astype(np.int64)) > 0
    prev = np.maximum(di - 1, 0)
    prev_gap = np.where(g.d_removed[prev], 0, g.d_gap[prev]) if d else np.zeros(len(path))
    return np.select(
        [kind == HOST, kind == GAP, kind == AWAIT, kind == AFTER, kind == QUEUE,
         (kind == LAUNCH) | (kind == GRAPH), kind == DEP, kind == DEVICE],
        [host(g.h_dur), host(g.h_gap), host(g.h_tail), host(g.h_after_lat) + host(g.h_dur),
         prev_gap, dev(g.d_offset), dev(g.d_dep_lat), np.where(removed, 0, dev(g.d_dur))],
        0).astype(np.int64)


def removed_from_path(base: ReplayGraph, changed: ReplayGraph, pts: Points,
                      path: np.ndarray) -> int | None:
    """What a scenario takes off the critical path as replayed: the sum over its edges of
    the weight each loses (None where the scenario changes the graph's shape). The
    replay's saving is at most about this: once the path is shorter, another chain may
    bound the step."""
    if len(changed.h_dur) != len(base.h_dur) or len(changed.d_dur) != len(base.d_dur) \
            or not np.array_equal(changed.d_rows, base.d_rows):  # rows reordered
        return None
    return int((_weights(base, pts, path) - _weights(changed, pts, path)).sum())
