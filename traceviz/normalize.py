"""What every parser shares once it has rows: time origin, launch links, ops, steps, categories.

A parser builds a frame with the base columns (kind, name, ts_ns, dur_ns, pid, tid,
device, stream, correlation, step, bytes) and calls ``finish``; everything derived
from them is computed here, once, for all formats. Optional extra columns: ``op_hint``
(the op a device row's source names, used where no host op encloses its launch) and
``details`` (kept as is). A ``step`` a parser already knows (>= 0) is kept. Strings stay
categorical codes throughout: per-name work (regexes, API lookups) runs once per distinct
name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz import classify, schema
from traceviz.intervals import innermost_enclosing
from traceviz.launch_apis import base_api_name, launch_kind
from traceviz.optree import parents_and_enclosing, thread_key
from traceviz.trace import Trace

BASE_COLUMNS = (
    "kind", "name", "ts_ns", "dur_ns", "pid", "tid", "device", "stream",
    "correlation", "step", "bytes",
)
_K = {k: np.int8(i) for i, k in enumerate(schema.KINDS)}
_C = {c: np.int8(i) for i, c in enumerate(schema.CATEGORIES)}


def launch_details(regs: np.ndarray, shared_mem: np.ndarray, grid: tuple, block: tuple
                   ) -> pd.Categorical:
    """A kernel's launch configuration as XSpace writes it (``regs:38 shm:0 grid:160,1,1
    block:1024,1,1``), formatted once per distinct configuration."""
    keys = pd.MultiIndex.from_arrays([regs, shared_mem, *grid, *block])
    codes, uniques = keys.factorize()
    text = [f"regs:{r} shm:{m} grid:{gx},{gy},{gz} block:{bx},{by},{bz}"
            for r, m, gx, gy, gz, bx, by, bz in uniques]
    return pd.Categorical.from_codes(codes, categories=text)


def _details(ev: pd.DataFrame, n: int) -> pd.Categorical:
    """The optional ``details`` column as a categorical, "" where a row has none."""
    if "details" not in ev:
        return pd.Categorical.from_codes(np.zeros(n, np.int8), categories=[""])
    d = ev["details"]
    d = d.array if isinstance(d.dtype, pd.CategoricalDtype) else pd.Categorical(d)
    if "" not in d.categories:
        d = d.add_categories("")
    return d.fillna("")


def _nullable(values: np.ndarray, valid: np.ndarray) -> pd.arrays.IntegerArray:
    return pd.arrays.IntegerArray(np.where(valid, values, 0).astype(np.int64), ~valid)


# ends past this many ns after the trace's first event (146 years) are dropped, so that
# every sum of two times the analyses form stays inside int64
MAX_SPAN_NS = 2 ** 62


def _within_range(ev: pd.DataFrame, meta: dict) -> pd.DataFrame:
    """Drop rows whose end lies beyond ``MAX_SPAN_NS`` from the first start; say so."""
    if ev.empty:
        return ev
    ts = ev["ts_ns"].to_numpy(np.int64)
    dur = ev["dur_ns"].to_numpy(np.int64)
    first = int(ts.min())
    # compare in float first: ts - first or + dur could overflow int64 itself
    far = (ts.astype(np.float64) - first + dur.astype(np.float64)) >= MAX_SPAN_NS
    if not far.any():
        return ev
    n = int(far.sum())
    meta.setdefault("notes", []).append(
        f"{n:,} event{'s' * (n != 1)} dropped: ending over 146 years after the trace's "
        "first event")
    return ev[~far].reset_index(drop=True)


def category_codes(kind: np.ndarray, name_codes: np.ndarray, categories: pd.Index,
                   is_cast: np.ndarray) -> np.ndarray:
    """Per row, the index into ``schema.CATEGORIES`` (-1 on rows that are not work)."""
    cat_codes = np.append(classify.category_codes(categories), _C["other"])[name_codes]
    cat_codes[kind == _K["memcpy"]] = _C["memcpy"]
    cat_codes[kind == _K["memset"]] = _C["memset"]
    cat_codes[is_cast & ((kind == _K["kernel"]) | (kind == _K["op"]))] = _C["cast"]
    is_device = np.isin(kind, [_K[k] for k in schema.DEVICE_KINDS])
    cat_codes[~(is_device | (kind == _K["op"]))] = -1
    return cat_codes


def kind_codes(kinds: pd.Series) -> np.ndarray:
    return kinds.astype(pd.CategoricalDtype(list(schema.KINDS))).cat.codes.to_numpy()


def _launch_calls(calls: np.ndarray, process: np.ndarray, corr: np.ndarray, ts: np.ndarray,
                  dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The launch calls device rows link to, and an id for every call in ``calls``.

    One call per (process, correlation id): a call recorded twice under one id, the inner
    record nested in the outer (nsys: ``cudaMemcpy`` around ``cudaMemcpy_v3020``), is
    one call, named by the outer record; the inner gets id -1. Ids follow time order.
    """
    ids = np.arange(len(calls), dtype=np.int64)
    has_corr = corr[calls] >= 0
    rows = calls[has_corr]
    # outer first: by key, then start, then longest
    order = np.lexsort((-dur[rows], ts[rows], corr[rows], process[rows]))
    rows = rows[order]
    key = pd.MultiIndex.from_arrays([process[rows], corr[rows]])
    dup = key.duplicated(keep="first")
    if dup.any():
        first = np.flatnonzero(~dup)
        owner = first[np.searchsorted(first, np.arange(len(rows)), side="right") - 1]
        outer = rows[owner]
        nested = dup & (ts[rows] >= ts[outer]) & (ts[rows] + dur[rows] <= ts[outer] + dur[outer])
        inner = np.isin(calls, rows[nested])
        ids = np.where(inner, -1, np.cumsum(~inner) - 1)
    return rows[~dup], ids


def _cast_ops(categories: pd.Index, names: np.ndarray, parent: np.ndarray,
              change: np.ndarray) -> np.ndarray:
    """Which op rows are casts: a conversion op (``aten::_to_copy``, TF ``Cast``...) or
    an ``aten::copy_`` that changes the floating-point format, and the ``copy_`` a
    conversion op delegates to. ``change`` is the parser's verdict from recorded dtypes
    (1 yes, 0 no, -1 unknown: then a conversion op counts as a cast)."""
    cast_op, cast_child = classify.cast_op_flags(categories)
    own = (cast_op[names] & (change != 0)) | (cast_child[names] & (change == 1))
    in_cast = np.where(parent >= 0, own[np.maximum(parent, 0)], False)
    return own | (cast_child[names] & in_cast & (change != 0))


def _enclosing_annotation(kind: np.ndarray, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray,
                          dur: np.ndarray, dev: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """(device row, annotation row) pairs: the innermost host range around each launch."""
    ann = np.flatnonzero((kind == _K["annotation"]) & (tid >= 0))
    if not len(ann) or not len(launch):
        return np.zeros((0, 2), dtype=np.int64)
    key = thread_key(pid[ann], tid[ann])
    found = innermost_enclosing(key, ts[ann], ts[ann] + dur[ann],
                                thread_key(pid[launch], tid[launch]), ts[launch])
    ok = found >= 0
    return np.column_stack([dev[ok], ann[found[ok]]])


def finish(base: pd.DataFrame, meta: dict, link_pid: str | None = None) -> Trace:
    """Derive the launch, op, step and category columns and return the ``Trace``.

    ``link_pid`` names a column giving, for runtime and device rows, the host process
    a correlation id belongs to (nsys numbers correlations per process); without it
    correlation ids are taken to be unique in the trace (Kineto, XSpace).
    """
    ev = _within_range(base.sort_values("ts_ns", kind="stable").reset_index(drop=True), meta)
    n = len(ev)
    ts = ev["ts_ns"].to_numpy(np.int64)
    origin = int(ts.min()) if n else 0
    ts = ts - origin
    dur = ev["dur_ns"].to_numpy(np.int64)
    meta = {**meta, "origin_ns": int(meta.get("origin_ns", 0)) + origin}
    if "dtype_change" in ev:  # the source recorded dtypes: casts are told from copies
        meta["dtypes_recorded"] = bool((ev["dtype_change"].to_numpy() >= 0).any())
    kind = kind_codes(ev["kind"])
    names = ev["name"].astype("category")
    name_codes = names.cat.codes.to_numpy()
    categories = names.cat.categories
    is_device = np.isin(kind, [_K[k] for k in schema.DEVICE_KINDS])

    # --- launch calls -> device rows, by correlation id -----------------------------
    base_names = np.array([base_api_name(str(c)) for c in categories] + [""], dtype=object)
    api_known = np.array([launch_kind(b) is not None for b in base_names], dtype=bool)
    api_names, api_of_name = np.unique(base_names, return_inverse=True)
    corr = ev["correlation"].to_numpy(np.int64)
    pid = ev["pid"].to_numpy(np.int64)
    tid = ev["tid"].to_numpy(np.int64)
    lp = ev[link_pid].to_numpy(np.int64) if link_pid is not None else np.zeros(n, np.int64)
    calls = np.flatnonzero((kind == _K["runtime"]) & api_known[name_codes])
    launch_rows, call_ids = _launch_calls(calls, lp, corr, ts, dur)
    launch_id = np.full(n, -1, dtype=np.int64)
    launch_id[calls] = call_ids
    device_rows = np.flatnonzero(is_device & (corr >= 0))
    # one launch per (process, correlation id): the key every analysis joins on
    launch_key = pd.MultiIndex.from_arrays([lp[launch_rows], corr[launch_rows]])
    device_key = pd.MultiIndex.from_arrays([lp[device_rows], corr[device_rows]])
    hit = launch_key.get_indexer(device_key)
    linked_dev = device_rows[hit >= 0]
    linked_launch = launch_rows[hit[hit >= 0]]
    launch_id[linked_dev] = launch_id[linked_launch]
    linked = np.zeros(n, dtype=bool)
    linked[linked_dev] = True
    launch_ts = np.zeros(n, dtype=np.int64)
    launch_dur = np.zeros(n, dtype=np.int64)
    launch_ts[linked_dev] = ts[linked_launch]
    launch_dur[linked_dev] = dur[linked_launch]
    launch_delay = np.maximum(0, ts - (launch_ts + launch_dur))
    api_codes = np.full(n, -1, dtype=np.int32)
    api_codes[linked_dev] = api_of_name[name_codes[linked_launch]]

    # --- innermost framework op around each launch ----------------------------------
    op_rows = np.flatnonzero(kind == _K["op"])
    ops = pd.DataFrame({"pid": pid[op_rows], "tid": tid[op_rows], "ts_ns": ts[op_rows],
                        "dur_ns": dur[op_rows]})
    op_name_codes = name_codes[op_rows]
    parent, launch_op = parents_and_enclosing(ops, pid[linked_launch], tid[linked_launch],
                                              ts[linked_launch])
    op_is_cast = _cast_ops(categories, op_name_codes, parent,
                           ev["dtype_change"].to_numpy(np.int8)[op_rows]
                           if "dtype_change" in ev else np.full(len(op_rows), -1, np.int8))
    has_op = launch_op >= 0
    op_codes = np.full(n, -1, dtype=np.int32)
    op_codes[linked_dev[has_op]] = op_name_codes[launch_op[has_op]]
    op_names = pd.Categorical.from_codes(op_codes, categories=categories, validate=False)
    hinted = np.zeros(n, dtype=bool)
    if "op_hint" in ev:
        hint = ev["op_hint"].astype(str).to_numpy()
        hinted = is_device & (op_codes < 0) & (hint != "")
        if hinted.any():
            op_names = pd.Categorical(np.where(hinted, hint, op_names.astype(object)))
    # no op and no hint: the innermost user range around the launch (NVTX ranges of
    # TensorRT layers, record_function / user ranges without ATen ops inside)
    ranged = _enclosing_annotation(kind, pid, tid, ts, dur, linked_dev[~has_op],
                                   linked_launch[~has_op])
    ranged = ranged[~hinted[ranged[:, 0]]] if len(ranged) else ranged
    if len(ranged):
        text = np.asarray(op_names.astype(object))
        text[ranged[:, 0]] = np.asarray(names.array.astype(object))[ranged[:, 1]]
        op_names = pd.Categorical(text)

    # --- steps ------------------------------------------------------------------------
    step = ev["step"].to_numpy(np.int64).copy()
    given = step >= 0
    step_rows = np.flatnonzero(kind == _K["step"])
    if len(step_rows):
        s_start = ts[step_rows]
        s_end = s_start + dur[step_rows]
        others = np.flatnonzero(kind != _K["step"])
        if (s_start[1:] >= s_end[:-1]).all():  # the usual case: steps one after another
            k = np.searchsorted(s_start, ts[others], side="right") - 1
            inside = np.where((k >= 0) & (ts[others] < s_end[np.maximum(k, 0)]), k, -1)
        else:
            inside = innermost_enclosing(np.zeros(len(step_rows), np.int64), s_start, s_end,
                                         np.zeros(len(others), np.int64), ts[others])
        step[others] = np.where(inside >= 0, step[step_rows][np.maximum(inside, 0)], -1)
        # a device row belongs to the step that launched it, wherever it ran
        step[linked_dev] = step[linked_launch]
        step[given] = ev["step"].to_numpy(np.int64)[given]

    # --- categories and casts ---------------------------------------------------------
    is_kernel = kind == _K["kernel"]
    is_cast = is_kernel & np.append(classify.cast_kernel_flags(categories), False)[name_codes]
    cast_launch = np.zeros(n, dtype=bool)
    cast_launch[linked_dev[has_op]] = op_is_cast[launch_op[has_op]]
    is_cast |= cast_launch & is_kernel
    if hinted.any():
        cast_hint = np.isin(np.asarray(op_names.astype(object)), list(classify.CAST_OPS))
        is_cast |= hinted & cast_hint & is_kernel
    is_cast[op_rows] = op_is_cast
    cat_codes = category_codes(kind, name_codes, categories, is_cast)

    out = pd.DataFrame({
        "kind": pd.Categorical.from_codes(kind, categories=list(schema.KINDS)),
        "name": names.array,
        "ts_ns": ts,
        "dur_ns": dur,
        "pid": pid,
        "tid": tid,
        "device": ev["device"].to_numpy(np.int32),
        "stream": ev["stream"].to_numpy(np.int32),
        "correlation": corr,
        "step": step,
        "bytes": ev["bytes"].to_numpy(np.int64),
        "launch_api": pd.Categorical.from_codes(api_codes, categories=api_names,
                                                validate=False).remove_unused_categories(),
        "launch_ts_ns": _nullable(launch_ts, linked),
        "launch_dur_ns": _nullable(launch_dur, linked),
        "launch_delay_ns": _nullable(launch_delay, linked),
        "launch_id": launch_id,
        "op": op_names.remove_unused_categories(),
        "category": pd.Categorical.from_codes(cat_codes, categories=list(schema.CATEGORIES)),
        "is_cast": is_cast,
        "details": _details(ev, n),
    })
    return Trace(events=out, meta=meta)
