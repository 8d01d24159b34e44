"""The device work of ranges (``nvtxgpuproj``, ``nvtxkernsum``) without a row per (kernel,
range holding it): the figures equal those of the plain join, pair by pair, here written
out in Python; deep nesting costs memory linear in kernels and ranges."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from traceviz.analyses.summary.ranges.instances import _depths, projection
from traceviz.analyses.summary.ranges.per_kernel import kernels_per_range, preorder


def _ranges(spans: list[tuple[str, int, int]], parent: list[int]) -> pd.DataFrame:
    """Ranges on one thread: (name, start, end) and each one's parent."""
    p = np.asarray(parent, dtype=np.int64)
    start = np.array([s for _, s, _ in spans], dtype=np.int64)
    end = np.array([e for _, _, e in spans], dtype=np.int64)
    return pd.DataFrame({
        "name": np.array([n for n, _, _ in spans], dtype=object),
        "style": pd.Categorical(["PushPop"] * len(spans), categories=["PushPop", "StartEnd"]),
        "start_ns": start, "end_ns": end, "dur_ns": end - start,
        "pid": np.full(len(spans), 1), "tid": np.full(len(spans), 1),
        "is_step": np.zeros(len(spans), bool), "parent": p, "depth": _depths(p)})


def _work(inner: list[int], names: list[str], durs: list[int], kernel: list[bool] | None = None,
          launch: list[int] | None = None) -> pd.DataFrame:
    """Device rows launched inside ``inner`` ranges, one launch each unless ``launch`` says
    (a graph launch: rows of one call, so of one range)."""
    n = len(inner)
    start = np.arange(n, dtype=np.int64) * 1000
    return pd.DataFrame({"range": np.asarray(inner, dtype=np.int64),
                         "launch": np.arange(n) if launch is None else np.asarray(launch),
                         "kernel": np.ones(n, bool) if kernel is None else np.asarray(kernel),
                         "name": np.array(names, dtype=object), "start_ns": start,
                         "end_ns": start + np.asarray(durs, dtype=np.int64),
                         "order": np.arange(n, dtype=np.int64) * 3})


def _pairs(ranges: pd.DataFrame, work: pd.DataFrame) -> pd.DataFrame:
    """The plain join: a row per (device row, range up its chain), level by level."""
    parent = ranges["parent"].to_numpy()
    rows, cur = [], work["range"].tolist()
    while any(c >= 0 for c in cur):
        rows += [(c, i) for i, c in enumerate(cur) if c >= 0]
        cur = [parent[c] if c >= 0 else -1 for c in cur]
    r, i = map(list, zip(*rows, strict=True))
    w = work.iloc[i]
    return pd.DataFrame({"range": r, "launch": w["launch"].to_numpy(),
                         "kernel": w["kernel"].to_numpy(), "name": w["name"].to_numpy(),
                         "start_ns": w["start_ns"].to_numpy(), "end_ns": w["end_ns"].to_numpy()})


def _plain_kernels(ranges: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """nvtxkernsum over the plain join, pandas' groupby on its rows in order."""
    k = pairs[pairs["kernel"].to_numpy()]
    r = ranges.iloc[k["range"].to_numpy()]
    frame = pd.DataFrame({"range": r["name"].to_numpy(), "style": r["style"].to_numpy(),
                          "pid": r["pid"].to_numpy(), "tid": r["tid"].to_numpy(),
                          "kernel": k["name"].to_numpy(), "inst": k["range"].to_numpy(),
                          "dur": (k["end_ns"] - k["start_ns"]).to_numpy()})
    keys = ["range", "style", "pid", "tid", "kernel"]
    g = frame.groupby(keys, sort=False)["dur"]
    out = pd.DataFrame({
        "ranges": frame.groupby(keys, sort=False)["inst"].nunique(), "kernels": g.size(),
        "total_ns": g.sum(), "avg_ns": g.mean(), "med_ns": g.median(), "min_ns": g.min(),
        "max_ns": g.max(), "std_ns": g.std(ddof=1).fillna(0.0)}).reset_index()
    out = out.sort_values(["range", "total_ns"], ascending=[True, False], kind="stable")
    return out.reset_index(drop=True)


def _chain(n: int, spread: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``n`` ranges each inside the one before, over ``n`` kernels launched in the
    innermost (``spread``: kernel i in range i)."""
    ranges = _ranges([(f"range_{i}", i, 3 * n - i) for i in range(n)], list(range(-1, n - 1)))
    return ranges, _work(list(range(n)) if spread else [n - 1] * n,
                         [f"kernel_{i % 4}" for i in range(n)], [100 + i % 7 for i in range(n)])


def _tree():
    """Two steps of nested ranges (``outer`` > ``mid`` > ``inner``, a ``mid`` holding a
    ``mid``), a range of no work, kernels at every level and one outside any range."""
    spans = [("outer", 0, 100), ("mid", 1, 50), ("inner", 2, 10), ("mid", 11, 40),
             ("inner", 12, 20), ("idle", 60, 70), ("outer", 200, 300), ("mid", 201, 250),
             ("inner", 202, 210)]
    parent = [-1, 0, 1, 1, 3, 0, -1, 6, 7]
    inner = [2, 2, 4, 3, 1, 0, 8, 8, 7, 6, 4, 2]
    names = ["gemm", "relu", "gemm", "gemm", "copy", "relu", "gemm", "relu", "gemm", "gemm",
             "relu", "gemm"]
    durs = [30, 5, 31, 29, 7, 6, 30, 4, 33, 28, 5, 30]
    launch = [0, 0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9]
    return _ranges(spans, parent), _work(inner, names, durs, [n != "copy" for n in names],
                                         launch)


def test_preorder_puts_the_nested_ranges_after_their_range():
    ranges, _ = _tree()
    pos, size = preorder(ranges["parent"].to_numpy(), ranges["depth"].to_numpy())
    assert pos.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert size.tolist() == [6, 4, 1, 2, 1, 1, 3, 2, 1]
    p = np.array([-1, 3, 0, -1, 0, 1])  # rows out of nesting order: 1 in 3, 2 and 4 in 0
    pos, size = preorder(p, _depths(p))
    assert size.tolist() == [3, 2, 1, 3, 1, 1]
    assert pos.tolist() == [0, 4, 1, 3, 2, 5]


@pytest.mark.parametrize("at_once", [None, 12, 20, 1, 7])
def test_kernels_per_range_are_the_plain_join_s(at_once):
    ranges, work = _tree()
    got = kernels_per_range(ranges, work, at_once)
    want = _plain_kernels(ranges, _pairs(ranges, work))
    if at_once in (1, 7):  # "mid" holds a "mid": its 12 pairs are weighted past 7 at once
        assert_frame_equal(got.drop(columns="std_ns"), want.drop(columns="std_ns"),
                           check_dtype=False)
        assert np.allclose(got["std_ns"], want["std_ns"], rtol=1e-12)
    else:
        assert_frame_equal(got, want, check_dtype=False)
    mid_gemm = got[(got["range"] == "mid") & (got["kernel"] == "gemm")].iloc[0]
    # gemms 0, 2, 3, 11 under the first mid, 2 and 3 again under the mid inside it, 6 and 8
    assert (mid_gemm["ranges"], mid_gemm["kernels"], mid_gemm["total_ns"]) == (3, 8, 243)
    assert (mid_gemm["min_ns"], mid_gemm["max_ns"], mid_gemm["med_ns"]) == (29, 33, 30.0)


def test_names_around_the_same_kernels_share_their_figures():
    """Steps of ``step`` > ``model`` > ``layer`` > ``op``: ``step`` and ``model`` hold the
    same kernels (their figures made once, placed a level apart), ``op`` ranges do not
    nest in each other, and a step without ``op`` ranges."""
    spans, parent, inner, names, durs = [], [], [], [], []
    for s in range(3):
        base = len(spans)
        spans += [("step", 100 * s, 100 * s + 90), ("model", 100 * s + 1, 100 * s + 80),
                  ("layer", 100 * s + 2, 100 * s + 70)]
        parent += [-1, base, base + 1]
        if s < 2:
            spans += [("op", 100 * s + 3, 100 * s + 10), ("op", 100 * s + 11, 100 * s + 20)]
            parent += [base + 2, base + 2]
        for i in range(4):
            inner.append(base + (3 + i % 2 if s < 2 else 2) if i < 3 else base + 1)
            names.append(["gemm", "relu"][(i + s) % 2])
            durs.append(10 + 3 * s + i)
    ranges = _ranges(spans, parent)
    work = _work(inner, names, durs)
    got = kernels_per_range(ranges, work)
    assert_frame_equal(got, _plain_kernels(ranges, _pairs(ranges, work)), check_dtype=False)
    assert len(got) == 8  # 4 names x 2 kernels
    step, model = (got[got["range"] == n].drop(columns="range").reset_index(drop=True)
                   for n in ("step", "model"))
    assert_frame_equal(step, model)
    assert step["kernels"].tolist() == [6, 6] and step["total_ns"].sum() == 174
    ranges, work = _chain(50)  # every name holds every kernel: all figures made once
    assert_frame_equal(kernels_per_range(ranges, work),
                       _plain_kernels(ranges, _pairs(ranges, work)), check_dtype=False)


def test_projection_is_the_plain_join_s():
    ranges, work = _tree()
    pairs = _pairs(ranges, work)
    g = pairs.assign(k=pairs["kernel"].astype(np.int64),
                     k_ns=np.where(pairs["kernel"], pairs["end_ns"] - pairs["start_ns"], 0)
                     ).groupby("range")
    want = pd.DataFrame({"proj_start_ns": g["start_ns"].min(),
                         "proj_ns": g["end_ns"].max() - g["start_ns"].min(),
                         "gpu_ops": g["launch"].nunique(), "kernels": g["k"].sum(),
                         "kernel_ns": g["k_ns"].sum()})
    got = projection(ranges, work)
    assert_frame_equal(got, want, check_dtype=False)
    assert got.loc[0].tolist() == [0, 11_030, 7, 7, 136]  # outer: rows 0-5, 10, 11


def test_deep_nesting_costs_memory_linear_in_kernels_and_ranges():
    """2,000 ranges each inside the one before, kernel i launched in range i: range j holds
    the 2,000 - j kernels from j on, no two names alike. The plain join is 2 million rows
    (over 700 MB; 6 GB for 4,000 kernels under 4,000 ranges); here a batch at most."""
    n = 2_000
    ranges, work = _chain(n, spread=True)
    tracemalloc.start()
    try:
        proj = projection(ranges, work)
        table = kernels_per_range(ranges, work)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 150 << 20, peak  # about 110 MB: the pairs of one batch (2**20 or so)
    dur = np.array([100 + i % 7 for i in range(n)])
    after = dur[::-1].cumsum()[::-1]  # range j: the kernels from j on
    assert proj["kernels"].tolist() == list(range(n, 0, -1))
    assert proj["kernel_ns"].tolist() == after.tolist()
    by_range = table.groupby("range", sort=False)
    assert by_range["total_ns"].sum()[[f"range_{j}" for j in range(n)]].tolist() == \
        after.tolist()
    last = table[table["range"] == "range_1997"].set_index("kernel")  # kernels 1997-1999
    assert last["kernels"].to_dict() == {"kernel_1": 1, "kernel_2": 1, "kernel_3": 1}
    assert last["total_ns"].to_dict() == {"kernel_1": 102, "kernel_2": 103, "kernel_3": 104}
