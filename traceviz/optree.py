"""Nesting of framework ops on their threads: parents, leaves, enclosing op of a time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.intervals import innermost_enclosing


def thread_key(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per (process, thread), to group rows by thread in numpy."""
    return (np.asarray(pid, dtype=np.int64) << 32) ^ (np.asarray(tid, dtype=np.int64) & 0xFFFFFFFF)


def op_parents(ops: pd.DataFrame) -> np.ndarray:
    """Positional index (into ``ops``) of each op's enclosing op on its thread, or -1."""
    key = thread_key(ops["pid"].to_numpy(), ops["tid"].to_numpy())
    start = ops["ts_ns"].to_numpy()
    end = start + ops["dur_ns"].to_numpy()
    return innermost_enclosing(key, start, end, key, start, q_exclude=np.arange(len(ops)))


def leaf_mask(ops: pd.DataFrame) -> np.ndarray:
    """True for ops that enclose no other op (they do the work on a CPU trace)."""
    parents = op_parents(ops)
    has_child = np.zeros(len(ops), dtype=bool)
    has_child[parents[parents >= 0]] = True
    return ~has_child


def enclosing_op(ops: pd.DataFrame, pid: np.ndarray, tid: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Positional index into ``ops`` of the innermost op around each (pid, tid, t), or -1."""
    key = thread_key(ops["pid"].to_numpy(), ops["tid"].to_numpy())
    start = ops["ts_ns"].to_numpy()
    end = start + ops["dur_ns"].to_numpy()
    return innermost_enclosing(key, start, end, thread_key(pid, tid), np.asarray(t, dtype=np.int64))
