"""User ranges one by one (NVTX push/pop and start/end ranges, record_function and
TraceMe scopes): their nesting and the device work launched inside them.

Definitions follow Nsight Systems' own reports: a range's **parent** is the tightest
range around it on its thread (``nvtxgpuproj``'s ParentId); device work belongs to every
range on the launching thread that holds its launch call, start to end; a range's
**projected** span runs from the first start to the last end of that work (``nvtxgpuproj``'s
Projected Start and Duration), its **GPU ops** are the launch calls that reached a device
(NumGPUOps: a graph launch counts once) and its **kernels** are listed as ``nvtxkernsum``
lists them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.algos.intervals import sorted_parents
from traceviz.algos.optree import parents_and_enclosing
from traceviz.algos.unique import unique_first
from traceviz.table.schema import is_in
from traceviz.table.steps import step_family

if TYPE_CHECKING:  # types only
    from traceviz.trace import Trace

DEFAULT_STYLE = "PushPop"  # record_function and TraceMe scopes, emit_nvtx op ranges
# the parsers that read ops and step marks out of NVTX ranges: there those rows are ranges
NVTX_SOURCES = ("nsys-sqlite", "nsys-arrow", "nsys-dir", "nsys-rep")


def range_rows(trace: Trace) -> pd.DataFrame:
    """Every host range of the trace, one row each, sorted by thread then start:
    ``name``, ``style``, ``start_ns``, ``end_ns``, ``dur_ns``, ``pid``, ``tid``, ``is_step``
    (a step mark), ``parent``
    (positional index of the tightest range around it on its thread, -1) and ``depth``.

    A range is a host annotation (NVTX range, record_function, TraceMe) or step mark; in
    an nsys export also an ``op`` row, which there is an emit_nvtx range (its name already
    folded to the op's). Device-side annotations (Kineto's ``gpu_user_annotation``) echo
    a host range and are left out. An nsys export's ranges read apart from the events
    table (``Trace.nvtx_ranges``) are those rows already."""
    if trace.nvtx_ranges is not None:
        return _nested(trace.nvtx_ranges)
    ev = trace.events
    kinds = ("annotation", "step", "op") if trace.meta.get("source_format") in NVTX_SOURCES \
        else ("annotation", "step")
    keep = is_in(ev["kind"], *kinds) & (ev["device"] < 0).to_numpy()
    r = ev.loc[keep, ["name", "ts_ns", "dur_ns", "pid", "tid", "details", "kind"]]
    # names and styles stay categorical: a million ranges have a few dozen names
    style = np.zeros(len(r), dtype=np.int8)  # 0 PushPop, 1 StartEnd
    is_ann = (r["kind"] == "annotation").to_numpy()
    if is_ann.any():
        d = r["details"].astype("category")
        startend = np.asarray(d.cat.categories.astype(str).str.startswith("style:StartEnd"),
                              dtype=bool)
        codes = d.cat.codes.to_numpy()
        style[is_ann & (codes >= 0)] = startend[codes[is_ann & (codes >= 0)]]
    start = r["ts_ns"].to_numpy(np.int64)
    dur = r["dur_ns"].to_numpy(np.int64)
    name = r["name"].astype("category").cat.remove_unused_categories()
    if trace.meta.get("source_format") not in NVTX_SOURCES:
        name = _steps_folded(name, (r["kind"] == "step").to_numpy())
    return _nested(pd.DataFrame({
        "name": name.cat.rename_categories(name.cat.categories.astype(str)).to_numpy(),
        "style": pd.Categorical.from_codes(style, categories=[DEFAULT_STYLE, "StartEnd"]),
        "start_ns": start, "end_ns": start + dur,
        "pid": r["pid"].to_numpy(np.int64), "tid": r["tid"].to_numpy(np.int64),
        "is_step": (r["kind"] == "step").to_numpy(),
    }))


def _nested(ranges: pd.DataFrame) -> pd.DataFrame:
    """``ranges`` (name, style, start_ns, end_ns, pid, tid, is_step) sorted by thread then
    start (the longest first), with ``dur_ns``, ``parent`` and ``depth``."""
    pid, tid = ranges["pid"].to_numpy(), ranges["tid"].to_numpy()
    start, end = ranges["start_ns"].to_numpy(), ranges["end_ns"].to_numpy()
    if _in_order(pid, tid, start, end):  # read sorted (Trace.nvtx_ranges): no copy
        out = ranges.copy(deep=False)
    else:
        out = ranges.take(np.lexsort((-end, start, tid, pid))).reset_index(drop=True)
    out.insert(4, "dur_ns", out["end_ns"].to_numpy() - out["start_ns"].to_numpy())
    pid, tid = out["pid"].to_numpy(), out["tid"].to_numpy()
    new_thread = np.ones(len(pid), dtype=bool)
    new_thread[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
    parent = sorted_parents(new_thread, out["start_ns"].to_numpy(), out["end_ns"].to_numpy())
    del new_thread
    # the latest-starting range holding a range's start may end before it does (ranges
    # that overlap without nesting: start/end ranges): climb to one that holds it whole
    end = out["end_ns"].to_numpy()
    # int32: a million ranges' positions and levels, the half of int64's memory
    parent = parent.astype(np.int32)
    parent = _climb(parent, parent.copy(), end, end)
    out["parent"] = parent
    out["depth"] = _depths(parent)
    return out


def _in_order(pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray
              ) -> bool:
    """Rows sorted by (pid, tid, start, end descending) already."""
    if len(pid) < 2:
        return True
    same_p = pid[1:] == pid[:-1]
    if (pid[1:] < pid[:-1]).any() or (same_p & (tid[1:] < tid[:-1])).any():
        return False
    same_t = same_p & (tid[1:] == tid[:-1])
    if (same_t & (start[1:] < start[:-1])).any():
        return False
    return not (same_t & (start[1:] == start[:-1]) & (end[1:] > end[:-1])).any()


def _steps_folded(name: pd.Series, is_step: np.ndarray) -> pd.Series:
    """Step marks' numbers folded (``ProfilerStep#5`` -> ``ProfilerStep#*``, ``step 3`` ->
    ``step *``): the steps are one range name, so the table holds one row for them, the
    kernels launched inside them count once per kernel, and runs with different step
    numbers compare. (An nsys export keeps every name as written: ``nvtxsum`` does.)"""
    cats = name.cat.categories.astype(str).to_numpy(object)
    folded = np.array([step_family(c) for c in cats], dtype=object)  # per distinct name
    if (folded == cats).all():
        return name
    codes = name.cat.codes.to_numpy()
    text = np.where(is_step, folded[codes], cats[codes])
    return pd.Series(pd.Categorical(text), index=name.index)


def _climb(parent: np.ndarray, at: np.ndarray, end: np.ndarray, need_end: np.ndarray
           ) -> np.ndarray:
    """From ``at`` (a range per query, -1: none) up the parents until a range ending at or
    after ``need_end`` (one numpy step per nesting level)."""
    at = at.copy()
    while True:
        short = np.flatnonzero(at >= 0)
        short = short[end[at[short]] < need_end[short]]
        if not len(short):
            return at
        at[short] = parent[at[short]]


def _depths(parent: np.ndarray) -> np.ndarray:
    depth = np.zeros(len(parent), dtype=np.int32)
    up = parent.copy()
    while (live := up >= 0).any():
        depth[live] += 1
        up[live] = parent[up[live]]
    return depth


def device_work(trace: Trace, ranges: pd.DataFrame) -> pd.DataFrame:
    """One row per device row whose launch call a range holds, in the trace's order:
    ``range`` (index into ``ranges``: the innermost range holding the call, start to end;
    the call is in every range up its ``parent`` chain too), ``launch`` (the launch id),
    ``kernel`` (a kernel, not a copy or set), ``name``, ``start_ns``, ``end_ns`` and
    ``order`` (its position among the device rows that have a launch call). Device rows
    whose launch call is not in the trace, or in no range, belong to no range.

    One row per device row, not one per (device row, range holding it): a kernel under
    4,000 nested ranges made 4,000 rows, 6 GB for 4,000 kernels."""
    cols = {"range": np.int64, "launch": np.int64, "kernel": bool, "name": object,
            "start_ns": np.int64, "end_ns": np.int64, "order": np.int64}
    empty = pd.DataFrame({c: pd.Series(dtype=t) for c, t in cols.items()})
    ev = trace.events
    if ranges.empty:
        return empty
    # row numbers and the few columns read, not filtered copies of the whole table
    lid = ev["launch_id"].to_numpy(np.int64)
    dev = np.flatnonzero(is_in(ev["kind"], "kernel", "memcpy", "memset") & (lid >= 0))
    calls = np.flatnonzero(is_in(ev["kind"], "runtime") & (lid >= 0))
    if not len(dev) or not len(calls):
        return empty
    # each device row's launch call: the first call of its launch id
    ids, first = unique_first(lid[calls])
    pos = np.minimum(np.searchsorted(ids, lid[dev]), len(ids) - 1)
    found = ids[pos] == lid[dev]
    dev, call = dev[found], calls[first[pos[found]]]
    c_start = ev["ts_ns"].to_numpy(np.int64)[call]
    c_end = c_start + ev["dur_ns"].to_numpy(np.int64)[call]
    _, inner = parents_and_enclosing(
        ranges["pid"].to_numpy(), ranges["tid"].to_numpy(), ranges["start_ns"].to_numpy(),
        ranges["dur_ns"].to_numpy(), ev["pid"].to_numpy(np.int64)[call],
        ev["tid"].to_numpy(np.int64)[call], c_start)
    # a range ends at or after the call it holds (nsys: range end >= call end)
    cur = _climb(ranges["parent"].to_numpy(), inner, ranges["end_ns"].to_numpy(), c_end)
    held = np.flatnonzero(cur >= 0)
    rows = dev[held]
    start = ev["ts_ns"].to_numpy(np.int64)[rows]
    return pd.DataFrame({
        "range": cur[held], "launch": lid[rows], "kernel": is_in(ev["kind"], "kernel")[rows],
        "name": _text_at(ev["name"], rows), "start_ns": start,
        "end_ns": start + ev["dur_ns"].to_numpy(np.int64)[rows], "order": held})


def _text_at(col: pd.Series, rows: np.ndarray) -> np.ndarray:
    """``col.astype(str).to_numpy(object)[rows]``, each category's text made once."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.array.codes[rows]
        if not (codes < 0).any():  # a missing value: as astype(str) writes it, below
            return col.cat.categories.astype(str).to_numpy(object)[codes]
    return col.iloc[rows].astype(str).to_numpy(object)


def by_depth(depth: np.ndarray) -> list[np.ndarray]:
    """The ranges at each nesting level, shallowest first, each level in row order."""
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def projection(ranges: pd.DataFrame, work: pd.DataFrame) -> pd.DataFrame:
    """Per range holding device work (index: its position in ``ranges``):
    ``proj_start_ns``, ``proj_ns`` (first start to last end of its work), ``gpu_ops``
    (launch calls that reached a device), ``kernels`` and ``kernel_ns`` (the kernels'
    own time, summed); ``work``: ``device_work``.

    A range's work is the work of its innermost ranges below it: each figure is summed
    (first start, last end: taken) per range over the device rows it holds innermost,
    then into its parent, one nesting level at a time from the deepest. A launch id is
    one call, held innermost by one range: distinct launches add up."""
    cols = ["proj_start_ns", "proj_ns", "gpu_ops", "kernels", "kernel_ns"]
    if work.empty:
        return pd.DataFrame(columns=cols, dtype=np.int64)
    n = len(ranges)
    node = work["range"].to_numpy(np.int64)
    start, end = work["start_ns"].to_numpy(np.int64), work["end_ns"].to_numpy(np.int64)
    is_k = work["kernel"].to_numpy(bool)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, node, start)
    np.maximum.at(last, node, end)
    sums = np.zeros((4, n), dtype=np.int64)  # device rows, launches, kernels, kernel time
    np.add.at(sums[0], node, 1)
    _, once = np.unique(work["launch"].to_numpy(np.int64), return_index=True)
    np.add.at(sums[1], node[once], 1)
    np.add.at(sums[2], node[is_k], 1)
    np.add.at(sums[3], node[is_k], (end - start)[is_k])
    parent = ranges["parent"].to_numpy()
    for level in by_depth(ranges["depth"].to_numpy())[:0:-1]:  # the deepest first
        up = parent[level]
        np.minimum.at(first, up, first[level])
        np.maximum.at(last, up, last[level])
        for row in sums:
            np.add.at(row, up, row[level])
    held = np.flatnonzero(sums[0] > 0)
    return pd.DataFrame({"proj_start_ns": first[held], "proj_ns": last[held] - first[held],
                         "gpu_ops": sums[1][held], "kernels": sums[2][held],
                         "kernel_ns": sums[3][held]}, index=pd.Index(held, name="range"))
