"""``nvtxkernsum``: the kernels launched inside each range, per range name and kernel name,
made without a row per (kernel, range holding it) for the whole trace at once.

A kernel belongs to every range up the chain from the innermost one holding its launch
(``instances.device_work``). In the ranges' preorder (a range, then the ranges nested in
it, depth first) a range's nested ranges follow it, so the kernels it holds, sorted by
their innermost range's place in that order, are one slice: two searches per range. The
(range, kernel) pairs are then made for a batch of range names at a time, at most about
``max(PAIRS_AT_ONCE, kernels + ranges)`` at once: memory stays linear in the trace (4,000
nested ranges over 4,000 kernels made 16 million rows at once, 6 GB). Each batch's figures
are pandas' own over its pairs in the order the one table of all pairs had (by nesting
level, innermost range first, then by the trace's order), so they are the same figures.
Names whose ranges sit at one nesting level each around the same kernels (a chain of
wrappers) share their figures, made once (``_alike``).

A range name whose pairs alone are more than that holds ranges of its name nested in each
other (without, a kernel is in at most one range of a name): there each kernel is taken
once with the count of those ranges around it (a weight), the standard deviation summed
over the weights (the same figure but for float rounding).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.analyses.summary.ranges.instances import by_depth

PAIRS_AT_ONCE = 1 << 20  # (range, kernel) pairs made at once, at least
COLUMNS = ["range", "style", "pid", "tid", "kernel", "ranges", "kernels", "total_ns",
           "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns"]


def preorder(parent: np.ndarray, depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each range's place in the preorder of the nesting forest (outermost ranges in row
    order, each followed by the ranges nested in it) and its size (itself and every range
    nested in it): the ranges nested in ``r`` hold the places ``pos[r]`` to
    ``pos[r] + size[r]``. One numpy step per nesting level."""
    size = np.ones(len(parent), dtype=np.int64)
    levels = by_depth(depth)
    for level in levels[:0:-1]:  # the deepest first: a range's size goes to its parent
        np.add.at(size, parent[level], size[level])
    pos = np.zeros(len(parent), dtype=np.int64)
    pos[levels[0]] = np.cumsum(size[levels[0]]) - size[levels[0]]
    for level in levels[1:]:
        level = level[np.argsort(parent[level], kind="stable")]  # siblings side by side
        up, s = parent[level], size[level]
        before = np.cumsum(s) - s
        new = np.r_[True, up[1:] != up[:-1]]
        # after its parent, a range comes after its earlier siblings and their nested ones
        pos[level] = pos[up] + 1 + before - before[new][np.cumsum(new) - 1]
    return pos, size


class _Pairs:
    """The kernels a range holds, as slices of the kernels sorted by their innermost
    range's place in the preorder, and what a pair's figures need."""

    def __init__(self, ranges: pd.DataFrame, kernels: pd.DataFrame):
        parent = ranges["parent"].to_numpy()
        self.depth = ranges["depth"].to_numpy(np.int64)
        pos, size = preorder(parent, self.depth)
        self.node = kernels["range"].to_numpy(np.int64)
        self.sorted = np.argsort(pos[self.node], kind="stable")
        at = pos[self.node][self.sorted]
        self.lo = np.searchsorted(at, pos, "left")
        self.held = np.searchsorted(at, pos + size, "left") - self.lo
        order = kernels["order"].to_numpy(np.int64)
        self.order, self.stride = order, int(order.max()) + 1
        self.dur = (kernels["end_ns"] - kernels["start_ns"]).to_numpy(np.int64)
        self.name, self.names = pd.factorize(kernels["name"].to_numpy(object))
        # a range's key: its name, style and thread, as the table groups them
        self.key = ranges.groupby(["name", "style", "pid", "tid"], sort=False,
                                  observed=True).ngroup().to_numpy(np.int64)
        self.n_ranges = len(ranges)

    def of(self, rs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(range, kernel, place in the one table of all pairs) of every pair of ``rs``."""
        c = self.held[rs]
        r = np.repeat(rs, c)
        step = np.arange(len(r)) - np.repeat(np.cumsum(c) - c, c)
        k = self.sorted[np.repeat(self.lo[rs], c) + step]
        # that table went level by level up the chains (innermost first), each in order
        return r, k, (self.depth[self.node[k]] - self.depth[r]) * self.stride + self.order[k]

    def group(self, r: np.ndarray, k: np.ndarray) -> np.ndarray:
        return self.key[r] * len(self.names) + self.name[k]


def kernels_per_range(ranges: pd.DataFrame, work: pd.DataFrame,
                      at_once: int | None = None) -> pd.DataFrame:
    """``nvtxkernsum``: per (range name, style, process, thread, kernel name): ``ranges``
    (instances holding one), ``kernels``, ``total_ns``, ``avg_ns``, ``med_ns``,
    ``min_ns``, ``max_ns``, ``std_ns`` (sample; 0 for one kernel), sorted by range name
    then total time (descending); a kernel counts in every range around its launch.
    ``work``: ``instances.device_work``; ``at_once``: pairs made at once (default: the
    larger of ``PAIRS_AT_ONCE`` and kernels + ranges)."""
    kernels = work[work["kernel"].to_numpy(bool)]
    if kernels.empty:
        return pd.DataFrame(columns=COLUMNS)
    p = _Pairs(ranges, kernels)
    budget = at_once or max(PAIRS_AT_ONCE, len(kernels) + len(ranges))
    per_key = np.zeros(int(p.key.max()) + 1, dtype=np.int64)
    np.add.at(per_key, p.key, p.held)
    shared, shift = _alike(p, len(per_key))
    per_key[shared != np.arange(len(per_key))] = 0  # their figures are another name's
    big = per_key > budget
    # range names side by side whose pairs start in the same budget-wide stretch
    small = np.flatnonzero(~big & (per_key > 0))
    batch = np.full(len(per_key), -1)
    batch[small] = (np.cumsum(per_key[small]) - per_key[small]) // budget
    rb = np.where(p.held > 0, batch[p.key], -1)
    by_batch = np.argsort(rb, kind="stable")
    cuts = np.searchsorted(rb[by_batch], np.arange(int(rb.max(initial=-1)) + 2))
    parts = [_figures(p, by_batch[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    parts += [_weighted(p, np.flatnonzero((p.key == key) & (p.held > 0)), budget)
              for key in np.flatnonzero(big)]
    table = _copied(pd.concat(parts), shared, shift, len(p.names))
    table = table.sort_values("first", kind="stable")  # the one table's order
    code = table.index.to_numpy(np.int64)
    first_of_key = np.zeros(len(per_key), dtype=np.int64)
    first_of_key[p.key[::-1]] = np.arange(len(ranges))[::-1]
    r = ranges.iloc[first_of_key[code // len(p.names)]]
    out = pd.DataFrame({"range": r["name"].to_numpy(), "style": r["style"].to_numpy(),
                        "pid": r["pid"].to_numpy(), "tid": r["tid"].to_numpy(),
                        "kernel": np.asarray(p.names, dtype=object)[code % len(p.names)],
                        **{c: table[c].to_numpy() for c in COLUMNS[5:]}})
    out = out.sort_values(["range", "total_ns"], ascending=[True, False], kind="stable")
    return out[COLUMNS].reset_index(drop=True)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: well spread 64-bit hashes (uint64 arithmetic wraps)."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _alike(p: _Pairs, keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Per range name (key): the key whose figures it shares (itself where none) and how
    far its pairs' places are from that key's. Names whose ranges sit at one nesting level
    each and hold the same slices of kernels (a chain of ranges around the same work,
    ``step`` > ``forward`` > ``layer``: 40 such names made 40 times the pairs) have the
    same pairs in the same order, a whole number of levels apart. Found by hashing each
    name's slices, then checked slice by slice."""
    shared, shift = np.arange(keys), np.zeros(keys, dtype=np.int64)
    live = np.flatnonzero(p.held > 0)
    lowest = np.full(keys, np.iinfo(np.int64).max)
    highest = np.full(keys, -1)
    np.minimum.at(lowest, p.key[live], p.depth[live])
    np.maximum.at(highest, p.key[live], p.depth[live])
    flat = live[(lowest == highest)[p.key[live]]]
    flat = flat[np.lexsort((p.held[flat], p.lo[flat], p.key[flat]))]
    key, lo, held = p.key[flat], p.lo[flat], p.held[flat]
    mixed = _mix(_mix(lo) ^ held.astype(np.uint64))
    h1, h2 = np.zeros(keys, dtype=np.uint64), np.zeros(keys, dtype=np.uint64)
    np.add.at(h1, key, mixed)  # sums: the same whatever the slices' order
    np.add.at(h2, key, _mix(mixed ^ np.uint64(0x5851F42D4C957F2D)))
    count = np.bincount(key, minlength=keys)
    names, start = np.unique(key, return_index=True)
    alike = pd.DataFrame({"n": count[names], "a": h1[names], "b": h2[names]}).groupby(
        ["n", "a", "b"], sort=False).ngroup().to_numpy()
    first = names[np.unique(alike, return_index=True)[1]][alike]  # the class's least key
    n = count[names]
    within = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    mine = np.repeat(start, n) + within
    theirs = np.repeat(start[np.searchsorted(names, first)], n) + within
    same = np.logical_and.reduceat((lo[mine] == lo[theirs]) & (held[mine] == held[theirs]),
                                   np.cumsum(n) - n) if len(n) else np.zeros(0, bool)
    names, first = names[same], first[same]
    shared[names] = first
    shift[names] = (lowest[first] - lowest[names]) * p.stride
    return shared, shift


def _copied(table: pd.DataFrame, shared: np.ndarray, shift: np.ndarray, names: int
            ) -> pd.DataFrame:
    """``table`` (index: group code) with the groups of the names that share another's
    figures: that name's rows, their places shifted."""
    others = np.flatnonzero(shared != np.arange(len(shared)))
    if not len(others):
        return table
    code = table.index.to_numpy(np.int64)
    rows = table.assign(key=code // names, name=code % names).reset_index(drop=True)
    extra = rows.merge(pd.DataFrame({"key": shared[others], "as": others,
                                     "shift": shift[others]}), on="key")
    extra.index = pd.Index(extra["as"].to_numpy() * names + extra["name"].to_numpy())
    extra["first"] += extra["shift"]
    return pd.concat([table, extra[table.columns]])


def _figures(p: _Pairs, rs: np.ndarray) -> pd.DataFrame:
    """The figures of the groups of ``rs``' pairs (index: group code), ``first``: the
    place of a group's first pair in the one table."""
    r, k, place = p.of(rs)
    o = np.argsort(place, kind="stable")
    r, k, place = r[o], k[o], place[o]
    codes, groups = pd.factorize(p.group(r, k))  # numbered by their first pair
    dur = p.dur[k]
    # counts, sums, extremes and middles need no order: numpy over the sorted durations
    by = np.lexsort((dur, codes))
    x = dur[by]
    first = np.searchsorted(codes[by], np.arange(len(groups)))
    n = np.diff(np.r_[first, len(x)])
    # the mean and deviation are pandas' running sums over the pairs in the table's order
    g = pd.Series(dur).groupby(pd.Categorical.from_codes(codes, np.arange(len(groups))),
                               observed=True)
    return pd.DataFrame({
        "ranges": np.bincount(np.unique(codes * p.n_ranges + r) // p.n_ranges),
        "kernels": n, "total_ns": np.add.reduceat(x, first), "avg_ns": g.mean().to_numpy(),
        "med_ns": (x[first + (n - 1) // 2] + x[first + n // 2]) / 2, "min_ns": x[first],
        "max_ns": x[first + n - 1], "std_ns": g.std(ddof=1).fillna(0.0).to_numpy(),
        "first": place[np.unique(codes, return_index=True)[1]]}, index=groups)


def _weighted(p: _Pairs, rs: np.ndarray, budget: int) -> pd.DataFrame:
    """``_figures`` for one range name whose ranges nest in each other: each kernel once,
    weighted by the count of those ranges around it; instances and first places from the
    pairs, made ``budget`` at a time."""
    edges = np.zeros(len(p.sorted) + 1, dtype=np.int64)
    np.add.at(edges, p.lo[rs], 1)
    np.add.at(edges, p.lo[rs] + p.held[rs], -1)
    weight = np.cumsum(edges[:-1])
    inside = np.flatnonzero(weight > 0)
    k, w = p.sorted[inside], weight[inside]
    name, x = p.name[k], p.dur[k]
    o = np.lexsort((x, name))
    name, x, w = name[o], x[o], w[o]
    first = np.flatnonzero(np.r_[True, name[1:] != name[:-1]])
    last = np.r_[first[1:], len(x)] - 1
    count, total = np.add.reduceat(w, first), np.add.reduceat(w * x, first)
    upto = np.cumsum(w)
    before = upto[first] - w[first]
    # the middle kernels' places in the group's sorted durations, weights spread out
    lo = np.searchsorted(upto, before + (count - 1) // 2, "right")
    hi = np.searchsorted(upto, before + count // 2, "right")
    mean = total / count
    dev = x - np.repeat(mean, last - first + 1)
    var = np.add.reduceat(w * dev * dev, first) / np.maximum(count - 1, 1)
    names = len(p.names)
    instances = np.zeros(names, dtype=np.int64)
    places = np.full(names, np.iinfo(np.int64).max)
    chunk = (np.cumsum(p.held[rs]) - p.held[rs]) // budget
    for c in np.unique(chunk):
        r, kk, place = p.of(rs[chunk == c])
        np.add.at(instances, np.unique(p.name[kk] * p.n_ranges + r) // p.n_ranges, 1)
        np.minimum.at(places, p.name[kk], place)
    n = name[first]
    return pd.DataFrame({
        "ranges": instances[n], "kernels": count, "total_ns": total, "avg_ns": mean,
        "med_ns": (x[lo] + x[hi]) / 2, "min_ns": x[first], "max_ns": x[last],
        "std_ns": np.where(count > 1, np.sqrt(var), 0.0), "first": places[n]},
        index=p.key[rs[0]] * names + n)
