"""Vectorized interval algorithms shared by the parsers and the analyses (all in ns)."""

from __future__ import annotations

from types import ModuleType

import numpy as np

from traceviz.algos.unique import unique, unique_inverse

_walk: ModuleType | None
try:  # built at install where a C compiler is found; numpy answers the same without it
    from traceviz.algos import _intervals_native as _walk
except ImportError:
    _walk = None


def union_blocks(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of half-open intervals [start, end) as sorted, disjoint blocks."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    firsts, lasts, reach = _blocks(s, np.maximum.accumulate(e))
    return s[firsts], reach[lasts]


def union_blocks_by_group(group: np.ndarray, starts: np.ndarray, ends: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``union_blocks`` of each group's intervals at once: (group, start, end) of every
    block, sorted by group then start."""
    g = np.asarray(group, dtype=np.int64)
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    g, s, e = g[keep], s[keep], e[keep]
    if len(s) == 0:
        return g, s, e
    order = np.lexsort((s, g))
    g, s, e = g[order], s[order], e[order]
    import pandas as pd  # a grouped running max (the rest of this module needs numpy only)

    reach = pd.Series(e).groupby(g, sort=False).cummax().to_numpy(np.int64)
    firsts, lasts, reach = _blocks(s, reach, g[1:] != g[:-1])
    return g[firsts], s[firsts], reach[lasts]


def _blocks(s: np.ndarray, reach: np.ndarray, breaks: np.ndarray | bool = False
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First and last interval of each covered block of the sorted intervals, given the
    running max of their ends (``reach``): an interval starts a new block iff it starts
    after everything before it has ended, or where ``breaks`` says (a new group)."""
    new_block = np.empty(len(s), dtype=bool)
    new_block[0] = True
    new_block[1:] = (s[1:] > reach[:-1]) | breaks
    firsts = np.flatnonzero(new_block)
    lasts = np.append(firsts[1:] - 1, len(s) - 1)
    return firsts, lasts, reach


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length covered by the union of half-open intervals [start, end)."""
    s, e = union_blocks(starts, ends)
    return int(np.sum(e - s))


def covered_until(block_start: np.ndarray, block_end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time ``t``: how much of the disjoint sorted blocks lies before it."""
    t = np.asarray(t, dtype=np.int64)
    if len(block_start) == 0:
        return np.zeros(len(t), dtype=np.int64)
    before = np.concatenate([[0], np.cumsum(block_end - block_start)])
    k = np.searchsorted(block_start, t, side="right") - 1
    inside = np.clip(t - block_start[np.maximum(k, 0)], 0,
                     (block_end - block_start)[np.maximum(k, 0)])
    return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0)


def clipped_lengths(starts: np.ndarray, ends: np.ndarray, win_start: np.ndarray,
                    win_end: np.ndarray) -> np.ndarray:
    """Length of each interval [start, end) that falls inside the disjoint, sorted
    windows (one value per interval; overlapping intervals are not merged)."""
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64)
    e = np.maximum(np.asarray(ends, dtype=np.int64), starts)
    return covered_until(win_start, win_end, e) - covered_until(win_start, win_end, starts)


def union_in_windows(starts: np.ndarray, ends: np.ndarray, win_start: np.ndarray,
                     win_end: np.ndarray) -> np.ndarray:
    """Per window: length of the union of the intervals inside it."""
    bs, be = union_blocks(starts, ends)
    return covered_until(bs, be, win_end) - covered_until(bs, be, win_start)


def max_overlap_in_windows(starts: np.ndarray, ends: np.ndarray, win_start: np.ndarray,
                           win_end: np.ndarray) -> int:
    """The most intervals open at one moment inside the windows (0 when none)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    if not keep.any() or len(win_start) == 0:
        return 0
    # closings first at equal times: they come first and the sort is stable (a merge of
    # the mostly ordered runs, cheaper than a lexsort)
    times = np.concatenate([e[keep], s[keep]])
    delta = np.concatenate([-np.ones(keep.sum(), np.int64), np.ones(keep.sum(), np.int64)])
    order = np.argsort(times, kind="stable")
    times, depth = times[order], np.cumsum(delta[order])
    # depth holds on [times[i], times[i+1]): keep the pieces that overlap a window
    nxt = np.append(times[1:], times[-1])
    inside = overlaps_windows(times, nxt, win_start, win_end)
    return int(depth[inside].max()) if inside.any() else 0


def overlaps_windows(starts: np.ndarray, ends: np.ndarray, win_start: np.ndarray,
                     win_end: np.ndarray) -> np.ndarray:
    """Per interval [start, end): does it overlap one of the sorted, disjoint windows by
    more than nothing. Only the first window ending after its start can be the one: any
    later window it overlaps begins after that window's start."""
    ws = np.asarray(win_start, dtype=np.int64)
    we = np.asarray(win_end, dtype=np.int64)
    ws, we = ws[we > ws], we[we > ws]
    if len(ws) == 0:
        return np.zeros(len(starts), dtype=bool)
    k = np.searchsorted(we, starts, side="right")
    return (starts < ends) & (k < len(ws)) & (ws[np.minimum(k, len(ws) - 1)] < ends)


def innermost_enclosing(
    group: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    q_group: np.ndarray,
    q_time: np.ndarray,
    q_exclude: np.ndarray | None = None,
) -> np.ndarray:
    """For each query, the index of the latest-starting interval of its group containing it.

    For properly nested ranges (ops on one thread) that is the innermost enclosing range.
    Among equal starts the longer interval counts as the earlier one. ``q_exclude`` (an
    interval index per query, or -1) makes a query skip that interval and everything
    sorted after it, so an interval can ask for its own parent. Returns -1 where nothing
    encloses. The compiled walk (``intervals_native.c``) answers in O(n + q) after the
    sorts where it is built and every excluding query asks at its interval's own start
    (an op's parent); else ``innermost_enclosing_numpy``, its oracle, answers.
    """
    group, start, end, q_group, q_time = (np.asarray(a, dtype=np.int64) for a in (
        group, start, end, q_group, q_time))
    if _walk is not None and len(start) and len(q_time):
        ex = None if q_exclude is None else np.asarray(q_exclude, dtype=np.int64)
        if ex is None or _own_starts(ex, group, start, q_group, q_time):
            return _walked(group, start, end, q_group, q_time, ex)
    return innermost_enclosing_numpy(group, start, end, q_group, q_time, q_exclude)


def _own_starts(ex: np.ndarray, group: np.ndarray, start: np.ndarray, q_group: np.ndarray,
                q_time: np.ndarray) -> bool:
    """Does every excluding query ask at its interval's start, in its group (what the
    walk answers: the intervals ranked before it)."""
    rows = np.flatnonzero(ex >= 0)
    x = ex[rows]
    return bool((x < len(start)).all() and (q_time[rows] == start[x]).all()
                and (q_group[rows] == group[x]).all())


def _walked(group: np.ndarray, start: np.ndarray, end: np.ndarray, q_group: np.ndarray,
            q_time: np.ndarray, ex: np.ndarray | None) -> np.ndarray:
    """``innermost_enclosing`` by the compiled walk: the sorts here, the walk in C."""
    n = len(start)
    order = np.lexsort((start - end, start, group))  # rank: group, start, longer first
    plain = np.arange(len(q_time)) if ex is None else np.flatnonzero(ex < 0)
    q_order = np.lexsort((q_time[plain], q_group[plain]))
    q_id = plain[q_order]
    ex_off = np.zeros(n + 1, dtype=np.int64)
    ex_id = np.zeros(0, dtype=np.int64)
    if ex is not None and len(plain) < len(ex):
        rank_of = np.empty(n, dtype=np.int64)
        rank_of[order] = np.arange(n)
        excluding = np.flatnonzero(ex >= 0)
        ex_rank = rank_of[ex[excluding]]
        ex_id = excluding[np.argsort(ex_rank, kind="stable")]
        np.cumsum(np.bincount(ex_rank, minlength=n), out=ex_off[1:])
    out = np.full(len(q_time), -1, dtype=np.int64)
    assert _walk is not None  # the caller's condition
    _walk.innermost(group[order], start[order], end[order], q_group[q_id], q_time[q_id],
                    q_id, ex_off, ex_id, out)
    found = out >= 0
    out[found] = order[out[found]]
    return out


def innermost_enclosing_numpy(
    group: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    q_group: np.ndarray,
    q_time: np.ndarray,
    q_exclude: np.ndarray | None = None,
) -> np.ndarray:
    """``innermost_enclosing`` in numpy alone, in O((n + q) log n): a sparse table of
    running maxima of ends lets every query jump back over ranges that ended."""
    n = len(start)
    result = np.full(len(q_time), -1, dtype=np.int64)
    if n == 0 or len(q_time) == 0:
        return result
    g_labels, g_codes = unique_inverse(np.concatenate([group, q_group]))
    gi, gq = g_codes[:n], g_codes[n:]
    lo = min(int(start.min()), int(q_time.min()))
    width = max(int(end.max()), int(q_time.max())) - lo + 2
    if width * len(g_labels) >= 2 ** 62:  # the packed axis would overflow int64: use ranks
        times, ranks = unique_inverse(np.concatenate([start, end, q_time]))
        start, end, q_time = ranks[:n], ranks[n:2 * n], ranks[2 * n:]
        lo, width = 0, len(times) + 2
    # one time axis for all groups: group k lives in [k*width, (k+1)*width)
    key_s = gi.astype(np.int64) * width + (start - lo)
    key_e = gi.astype(np.int64) * width + (end - lo)
    key_q = gq.astype(np.int64) * width + (q_time - lo)
    del g_labels, g_codes, gi, gq  # arrays of n + q: an import's peak passes through here
    # sort by start; among equal starts the longer (outer) range first
    order = np.lexsort((-(end - start), key_s))
    ks = key_s[order]
    del key_s
    ke = key_e[order]
    del key_e
    pos = np.searchsorted(ks, key_q, side="right") - 1
    del ks
    if q_exclude is not None:
        rank_of = np.empty(n, dtype=np.int64)
        rank_of[order] = np.arange(n)
        has_ex = q_exclude >= 0
        pos = np.where(has_ex, np.minimum(pos, rank_of[np.maximum(q_exclude, 0)] - 1), pos)
        del rank_of, has_ex
    # the sparse table holds log2(n) copies of the ends: as int32 ranks among the ends and
    # query times (order kept, so every comparison below is unchanged), it takes half the
    # memory, the largest transient of an import
    both, ranked = unique_inverse(np.concatenate([ke, key_q]))
    del both
    ke = ranked[:n].astype(np.int32)
    key_q = ranked[n:].astype(np.int32)
    del ranked
    # sparse table: table[p][j] = max(ke[j - 2^p + 1 .. j])
    table = [ke]
    step = 1
    while step * 2 <= n:
        prev = table[-1]
        cur = prev.copy()
        cur[step:] = np.maximum(prev[step:], prev[:-step])
        table.append(cur)
        step *= 2
    for p in range(len(table) - 1, -1, -1):
        size = 1 << p
        ok = pos - size + 1 >= 0
        idx = np.where(ok, pos, 0)
        skip = ok & (table[p][idx] <= key_q)
        pos = np.where(skip, pos - size, pos)
    found = pos >= 0
    idx = np.where(found, pos, 0)
    found &= ke[idx] > key_q
    result[found] = order[idx[found]]
    return result


def attribute_union(starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, n: int,
                    win_start: np.ndarray, win_end: np.ndarray) -> np.ndarray:
    """Split the union of the intervals inside the windows among their labels: each
    moment goes to the labels open then, in proportion to how many of each are open.
    Returns n float totals (label ``codes`` in 0..n-1) summing to the union's length in
    the windows, so stacked per-label bars never exceed the time they describe.

    With w_i the weight of elementary segment i (its length in the windows / intervals
    open), label c gets sum_i w_i * open_c(i) = sum over its boundaries j of
    delta_j * (sum of w from j on): one sort and one reverse cumulative sum."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    if not keep.any() or len(win_start) == 0:
        return np.zeros(n)
    s, e, c = s[keep], e[keep], np.asarray(codes, dtype=np.int64)[keep]
    times = np.concatenate([s, e])
    delta = np.concatenate([np.ones(len(s)), -np.ones(len(s))])
    label = np.concatenate([c, c])
    order = np.lexsort((delta, times))  # at equal times, closings first
    times, delta, label = times[order], delta[order], label[order]
    open_ = np.cumsum(delta)
    seg = clipped_lengths(times[:-1], times[1:], win_start, win_end).astype(np.float64)
    w = np.zeros(len(times))
    live = open_[:-1] > 0
    w[:-1][live] = seg[live] / open_[:-1][live]
    suffix = np.cumsum(w[::-1])[::-1]
    return np.bincount(label, weights=delta * suffix, minlength=n)[:n]


def intersect_blocks(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray,
                     b_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The intersection of two sets of sorted, disjoint blocks, as sorted disjoint
    blocks: each piece between consecutive boundaries of either set that both cover."""
    a_start, a_end = np.asarray(a_start, np.int64), np.asarray(a_end, np.int64)
    b_start, b_end = np.asarray(b_start, np.int64), np.asarray(b_end, np.int64)
    if not len(a_start) or not len(b_start):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    t = unique(np.concatenate([a_start, a_end, b_start, b_end]))
    lo, hi = t[:-1], t[1:]

    def covers(s: np.ndarray, e: np.ndarray) -> np.ndarray:
        k = np.searchsorted(s, lo, side="right") - 1
        return (k >= 0) & (lo < e[np.maximum(k, 0)])

    both = covers(a_start, a_end) & covers(b_start, b_end)
    return union_blocks(lo[both], hi[both])


def covering(block_start: np.ndarray, block_end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time ``t``: does one of the sorted, disjoint blocks [start, end) hold it."""
    t = np.asarray(t, dtype=np.int64)
    if not len(block_start):
        return np.zeros(len(t), dtype=bool)
    k = np.searchsorted(block_start, t, side="right") - 1
    return (k >= 0) & (t < block_end[np.maximum(k, 0)])


def elementary(*edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pieces between consecutive distinct times of ``edges``: inside each, every
    set of intervals whose ends are among them is either wholly present or absent."""
    t = unique(np.concatenate([np.asarray(e, dtype=np.int64) for e in edges]))
    return t[:-1], t[1:]


def sorted_parents(new_group: np.ndarray, start: np.ndarray, end: np.ndarray
                   ) -> np.ndarray:
    """For intervals sorted by group, then start (the longer first among equal starts;
    ``new_group``: True where a group begins): each one's latest-starting earlier interval
    of its group that ends after it starts (-1: none), which is ``innermost_enclosing`` of
    each interval's own start, itself and the intervals after it excluded, in O(n) memory
    (its sparse table holds log2(n) copies of the ends: 80 MB for a million ranges).

    Every interval starts from the one before it and jumps back, by the candidates'
    own current candidates, over intervals that end before it starts: the intervals
    between a candidate ``c`` and its candidate end before ``c`` starts, so before any
    later interval starts. Jumps compose, so the rounds are about log2 of the longest
    chain of intervals jumped over."""
    n = len(start)
    cand = np.arange(-1, n - 1, dtype=np.int64)
    cand[new_group] = -1
    # the first round on whole arrays: the interval before it
    todo = np.flatnonzero(np.r_[False, end[:-1] <= start[1:]] & (cand >= 0))
    while len(todo):
        cand[todo] = cand[cand[todo]]
        todo = todo[cand[todo] >= 0]
        todo = todo[end[cand[todo]] <= start[todo]]  # the candidate ended: not it
    return cand
