"""Nesting of framework ops on their threads: parents, leaves, enclosing op of a time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.algos.intervals import innermost_enclosing


def thread_key(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per (process, thread), to group rows by thread in numpy."""
    return (np.asarray(pid, dtype=np.int64) << 32) ^ (np.asarray(tid, dtype=np.int64) & 0xFFFFFFFF)


def op_parents(ops: pd.DataFrame) -> np.ndarray:
    """Positional index (into ``ops``) of each op's enclosing op on its thread, or -1."""
    key = thread_key(ops["pid"].to_numpy(), ops["tid"].to_numpy())
    start = ops["ts_ns"].to_numpy()
    end = start + ops["dur_ns"].to_numpy()
    return innermost_enclosing(key, start, end, key, start, q_exclude=np.arange(len(ops)))


SELF_SHARE = 0.5


def work_op_mask(ops: pd.DataFrame) -> np.ndarray:
    """Ops that are units of work on a CPU trace.

    An op is work when it spends at least ``SELF_SHARE`` of its time in itself rather
    than in ops nested in it (aten::mm over resolve_conj, oneDNN's rnn layer over its
    bias add: yes; aten::linear over addmm, autograd wrappers: no); ops nested in a
    unit of work are part of it, so nothing is counted twice. The share is taken over
    every call of the op in the same place (its name and its ancestors' names), so the
    same op in the same place is work in every step or in none: a call whose own share
    jitters across 50% (an addmm at 65% in one step, 47% in the next) does not flip
    between work and framework overhead.
    """
    parents = op_parents(ops)
    dur = ops["dur_ns"].to_numpy(np.int64)
    nested = np.zeros(len(ops), dtype=np.int64)
    has_parent = parents >= 0
    np.add.at(nested, parents[has_parent], dur[has_parent])
    place = _places(ops["name"], parents)
    own = pd.Series(dur - nested).groupby(place).transform("sum").to_numpy(np.float64)
    total = pd.Series(dur).groupby(place).transform("sum").to_numpy(np.float64)
    unit = own >= SELF_SHARE * total
    inside_unit = np.zeros(len(ops), dtype=bool)
    up = parents.copy()
    while (up >= 0).any():  # one pass per nesting level, all ops at once
        live = up >= 0
        inside_unit[live] |= unit[up[live]]
        up[live] = parents[up[live]]
    return unit & ~inside_unit


def _places(names: pd.Series, parents: np.ndarray) -> np.ndarray:
    """An id per distinct path of op names from the root of its thread's nesting to the
    op (``aten::addmm`` under ``aten::linear`` under ``forward``), one nesting level at a
    time."""
    code = pd.Categorical(names).codes.astype(np.int64)
    depth = np.zeros(len(parents), dtype=np.int64)
    up = parents.copy()
    while (up >= 0).any():
        live = up >= 0
        depth[live] += 1
        up[live] = parents[up[live]]
    place = np.full(len(parents), -1, dtype=np.int64)
    for d in range(int(depth.max()) + 1 if len(depth) else 0):
        rows = np.flatnonzero(depth == d)
        above = place[parents[rows]] if d else np.full(len(rows), -1, dtype=np.int64)
        place[rows] = pd.MultiIndex.from_arrays([above, code[rows]]).factorize()[0] \
            + (place.max() + 1 if d else 0)
    return place


def parents_and_enclosing(pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                          q_pid: np.ndarray, q_tid: np.ndarray, q_t: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """For ops given as columns (pid, tid, ts, dur): ``op_parents`` and the innermost op
    around each query (q_pid, q_tid, q_t), in one pass."""
    key = thread_key(pid, tid)
    start = np.asarray(ts, dtype=np.int64)
    end = start + np.asarray(dur, dtype=np.int64)
    n = len(start)
    found = innermost_enclosing(
        key, start, end,
        np.concatenate([key, thread_key(q_pid, q_tid)]),
        np.concatenate([start, np.asarray(q_t, dtype=np.int64)]),
        q_exclude=np.concatenate([np.arange(n), np.full(len(q_t), -1)]),
    )
    return found[:n], found[n:]


def op_tree(ops: pd.DataFrame) -> pd.DataFrame:
    """Per op row (positionally aligned with ``ops``): ``parent`` (positional index of the
    enclosing op on its thread, -1 at the top), ``depth`` (0 at the top), ``self_ns``
    (its time minus the time of the ops directly inside it) and ``is_leaf``.

    A SQL sum of ``self_ns`` over ops counts every nanosecond once; a sum of ``dur_ns``
    counts a nested op in each of its ancestors too."""
    parents = op_parents(ops)
    dur = ops["dur_ns"].to_numpy(np.int64)
    nested = np.zeros(len(ops), dtype=np.int64)
    children = np.zeros(len(ops), dtype=np.int64)
    has_parent = parents >= 0
    np.add.at(nested, parents[has_parent], dur[has_parent])
    np.add.at(children, parents[has_parent], 1)
    depth = np.zeros(len(ops), dtype=np.int32)
    up = parents.copy()
    while (up >= 0).any():  # one pass per nesting level, all ops at once
        live = up >= 0
        depth[live] += 1
        up[live] = parents[up[live]]
    return pd.DataFrame({"parent": parents, "depth": depth,
                         "self_ns": np.maximum(dur - nested, 0), "is_leaf": children == 0},
                        index=ops.index)
