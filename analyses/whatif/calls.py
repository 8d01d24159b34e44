"""Launch calls as the framework issued them, for the ladder's what-if scenarios
(``whatif/lstm_rungs.py``): the framework op each launch belongs to, the blocks of launches
that repeat back to back, and host time taken out of a replay graph.

A launch's *token* says what it launched: its kernel's name and launch configuration,
its stream, and the framework op it belongs to (name and recorded shapes); two launches
with one token did the same thing. A *repeat* is a block of launches followed at once by
copies of itself (equal tokens, one thread, one step): a loop's iterations. The
*recurrence step* is the shortest block whose repeats cover (nearly) as many launches as
any block's do: an RNN's time step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceviz.algos.optree import parents_and_enclosing
from traceviz.analyses.replay.graph import ReplayGraph

MAX_BLOCK = 512       # the longest repeating block looked for, in launches
PERIOD_SHARE = 0.9    # the recurrence step: the shortest block covering this share of the
                      # most launches any block's repeats cover (a multiple covers as much)


@dataclass(frozen=True)
class Launches:
    """The live launch calls of a replay graph in their threads' order, one per call."""

    node: np.ndarray      # host node
    chain: np.ndarray
    step: np.ndarray
    row: np.ndarray       # its one device row (-1: it launched several, a graph)
    token: np.ndarray     # what it launched (equal tokens: the same thing)
    call: np.ndarray      # the framework op it belongs to (an id; unique where it has none)
    gemm: np.ndarray      # bool: that op launched a GEMM kernel
    op_start: np.ndarray  # the op's recorded interval (the call's own where it has none)
    op_end: np.ndarray


def launches(g: ReplayGraph) -> Launches:
    ev = g.trace.events
    live = (g.d_launch >= 0) & ~g.d_removed
    count = np.bincount(g.d_launch[live], minlength=len(g.h_ts))
    row_of = np.full(len(g.h_ts), -1, np.int64)
    row_of[g.d_launch[live]] = np.flatnonzero(live)
    node = np.flatnonzero(g.h_launch & (count > 0))  # host nodes are in thread order
    row = np.where(count[node] == 1, row_of[node], -1)
    kind = ev["kind"].to_numpy()
    ops = np.flatnonzero(kind == "op")
    pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    ts, dur = ev["ts_ns"].to_numpy(np.int64), ev["dur_ns"].to_numpy(np.int64)
    h_ev = g.h_rows[node]
    parents, inner = parents_and_enclosing(pid[ops], tid[ops], ts[ops], dur[ops],
                                           pid[h_ev], tid[h_ev], g.h_ts[node])
    op = _outermost_alone(parents, inner)
    has = op >= 0
    o_ev = ops[np.maximum(op, 0)] if len(ops) else np.zeros(len(op), np.int64)
    r = np.maximum(row, 0)
    d_ev = g.d_rows[r]
    codes = [ev[c].cat.codes.to_numpy(np.int64) for c in ("name", "details")]
    token = pd.MultiIndex.from_arrays([
        codes[0][d_ev], codes[1][d_ev], g.d_stream[r],
        np.where(has, codes[0][o_ev], -1), np.where(has, codes[1][o_ev], -1)]).factorize()[0]
    token = np.where(row >= 0, token, -1 - np.arange(len(node)))  # a graph: like nothing
    call = np.where(has, op, len(ops) + np.arange(len(node)))
    cat = ev["category"].to_numpy()[d_ev].astype(object)
    gemm = pd.Series((cat == "gemm") & (row >= 0)).groupby(call).transform("any").to_numpy(bool)
    end = ts + dur
    return Launches(node, g.h_chain[node], ev["step"].to_numpy(np.int64)[h_ev], row, token,
                    call, gemm, np.where(has, ts[o_ev], g.h_ts[node]),
                    np.where(has, end[o_ev], g.h_end_rec[node]))


def _outermost_alone(parents: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """Per launch, from its innermost op up to the outermost one that launched nothing
    else (``aten::linear`` over ``aten::addmm``: the linear)."""
    n = len(parents)
    if not n:
        return inner
    total = np.bincount(inner[inner >= 0], minlength=n)
    depth = np.zeros(n, np.int64)
    up = parents.copy()
    while (up >= 0).any():  # one pass per nesting level
        live = up >= 0
        depth[live] += 1
        up[live] = parents[up[live]]
    for d in range(int(depth.max(initial=0)), 0, -1):
        at = np.flatnonzero(depth == d)
        np.add.at(total, parents[at], total[at])
    cur = inner.copy()
    while True:
        p = np.where(cur >= 0, parents[np.maximum(cur, 0)], -1)
        climb = (p >= 0) & (total[np.maximum(p, 0)] == total[np.maximum(cur, 0)])
        if not climb.any():
            return cur
        cur = np.where(climb, p, cur)


def repeats(s: Launches, q: int) -> tuple[np.ndarray, np.ndarray]:
    """(first launch, copies) of every maximal run of a block of ``q`` launches repeated
    back to back (at least twice)."""
    n = len(s.token)
    if q >= n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    eq = ((s.token[:-q] == s.token[q:]) & (s.chain[:-q] == s.chain[q:])
          & (s.step[:-q] == s.step[q:]))
    edge = np.diff(np.concatenate([[0], eq.astype(np.int8), [0]]))
    first, stop = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
    copies = (stop - first + q) // q
    keep = copies >= 2
    return first[keep], copies[keep]


def recurrence_step(s: Launches) -> tuple[int, int]:
    """The recurrence step in launches and how many of them the trace holds (0, 0:
    nothing repeats)."""
    top = min(MAX_BLOCK, len(s.token) // 2)
    covered = np.array([int((repeats(s, q)[1] * q).sum()) for q in range(1, top + 1)])
    if not len(covered) or covered.max() == 0:
        return 0, 0
    q = int(np.argmax(covered >= PERIOD_SHARE * covered.max())) + 1
    return q, int(covered[q - 1]) // q


@dataclass(frozen=True)
class Merge:
    """Launches that become one: per launch (a position in ``Launches``) in a group, the
    position of the launch that stays (copy 0, same place) and its copy."""

    pos: np.ndarray
    head: np.ndarray
    copy: np.ndarray

    def calls(self, s: Launches, gemm: bool = True) -> tuple[int, int]:
        """(calls, calls once merged): of the GEMM calls, or of all."""
        take = s.gemm[self.pos] if gemm else np.ones(len(self.pos), bool)
        return (len(np.unique(s.call[self.pos[take]])),
                len(np.unique(s.call[self.head[take]])))


def block_groups(s: Launches, first: np.ndarray, copies: np.ndarray, q: int,
                 gemm_only: bool) -> Merge:
    """The calls of runs (``first``, ``copies``) of a ``q``-launch block (its GEMM calls
    only, or all): the calls at one place of every copy make one group, where a call lies
    in one copy."""
    total = int((copies * q).sum())
    run = np.repeat(np.arange(len(first)), copies * q)
    within = np.arange(total) - np.repeat(np.cumsum(copies * q) - copies * q, copies * q)
    pos = np.repeat(first, copies * q) + within
    copy = within // q
    keep = ~pd.Series(pos).duplicated().to_numpy()  # runs may overlap
    if gemm_only:
        keep &= s.gemm[pos]
    pos, run, copy = pos[keep], run[keep], copy[keep]
    call = pd.Series(s.call[pos])
    # a call whose launches all lie in one copy of one run (none outside it)
    where = pd.Series(run * (int(copies.max(initial=1)) + 1) + copy).groupby(call.to_numpy())
    whole = ((where.transform("min") == where.transform("max")).to_numpy()
             & (call.map(call.value_counts()) == call.map(pd.Series(s.call).value_counts()))
             .to_numpy())
    pos, copy = pos[whole], copy[whole]
    return Merge(pos, pos - copy * q, copy)


def merged(g: ReplayGraph, s: Launches, m: Merge) -> ReplayGraph:
    """Each group's copy 0 launches stay, each lasting the sum of its copies' device time;
    the other copies' device rows, launch calls and framework ops go."""
    if not len(m.pos):
        return g
    row = s.row[m.pos]
    total = pd.Series(g.d_dur[row]).groupby(m.head).sum()
    d_dur = g.d_dur.copy()
    d_dur[s.row[total.index.to_numpy()]] = total.to_numpy(np.int64)
    gone = m.copy > 0
    d_removed = g.d_removed.copy()
    d_removed[row[gone]] = True
    h_dur = g.h_dur.copy()
    h_dur[s.node[m.pos[gone]]] = 0
    calls = np.unique(s.call[m.pos[gone]])
    first = pd.Series(np.arange(len(s.call))).groupby(s.call).first().loc[calls].to_numpy()
    changed = g.with_changes(d_dur=d_dur, d_removed=d_removed, h_dur=h_dur)
    return without_host_time(changed, s.chain[first], s.op_start[first], s.op_end[first])


def without_host_time(g: ReplayGraph, chain: np.ndarray, start: np.ndarray,
                      end: np.ndarray) -> ReplayGraph:
    """The graph with the host time the intervals (per chain, recorded times) cover taken
    out: every node's gap before it and its own time lose what of them they cover."""
    if not len(chain):
        return g
    order = np.lexsort((start, chain))
    chain, start, end = chain[order], start[order], end[order]
    reach = pd.Series(end).groupby(chain).cummax().to_numpy(np.int64)
    new = np.ones(len(chain), bool)
    new[1:] = (chain[1:] != chain[:-1]) | (start[1:] > reach[:-1])
    cluster = np.cumsum(new) - 1
    u_start = pd.Series(start).groupby(cluster).min().to_numpy(np.int64)
    u_end = pd.Series(end).groupby(cluster).max().to_numpy(np.int64)
    u_chain = chain[new]
    prev_end = np.roll(g.h_end_rec, 1)
    gap_cut = np.zeros(len(g.h_ts), np.int64)
    own_cut = np.zeros(len(g.h_ts), np.int64)
    for c in np.unique(u_chain):  # per thread, few
        mine = np.flatnonzero(g.h_chain == c)
        cs, ce = u_start[u_chain == c], u_end[u_chain == c]
        gap_cut[mine] = _covered(cs, ce, prev_end[mine], g.h_ts[mine])
        own_cut[mine] = _covered(cs, ce, g.h_ts[mine], g.h_end_rec[mine])
    gap_cut[g.h_first] = 0
    own_cut[g.h_await >= 0] = 0  # a call that waited: its own time is its tail
    return g.with_changes(h_gap=np.maximum(g.h_gap - gap_cut, 0),
                          h_dur=np.maximum(g.h_dur - own_cut, 0))


def _covered(start: np.ndarray, end: np.ndarray, a: np.ndarray, b: np.ndarray
             ) -> np.ndarray:
    """How much of each [a, b] the disjoint sorted intervals [start, end] cover."""
    cum = np.concatenate([[0], np.cumsum(end - start)])

    def before(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(start, t, side="right") - 1
        kk = np.maximum(k, 0)
        return np.where(k >= 0, cum[kk] + np.clip(t - start[kk], 0, end[kk] - start[kk]), 0)

    return np.maximum(before(b) - before(a), 0)
