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

from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceviz.algos.categorical import from_used_codes, per_distinct
from traceviz.algos.intervals import innermost_enclosing
from traceviz.algos.optree import parents_and_enclosing, thread_key
from traceviz.parsers.joined import moved_by_time
from traceviz.system.heap import release_free_memory
from traceviz.table import classify, schema
from traceviz.table.launch_apis import base_api_name, is_graph_launch, launch_kind
from traceviz.table.meta import TraceMeta
from traceviz.table.names import demangled_categories
from traceviz.table.rowcodes import KIND_CODE, category_codes, kind_codes
from traceviz.trace import Trace

BASE_COLUMNS = (
    "kind", "name", "ts_ns", "dur_ns", "pid", "tid", "device", "stream",
    "correlation", "step", "bytes",
)
_K = KIND_CODE


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


def _within_range(ev: pd.DataFrame, meta: TraceMeta) -> pd.DataFrame:
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
    # sorted by key: a repeated key is equal to the one before it
    dup = np.zeros(len(rows), dtype=bool)
    dup[1:] = (process[rows][1:] == process[rows][:-1]) & (corr[rows][1:] == corr[rows][:-1])
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


def _enclosing_annotation(r: _Rows, dev: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """(device row, annotation row) pairs: the innermost host range around each launch."""
    ann = np.flatnonzero((r.kind == _K["annotation"]) & (r.tid >= 0))
    if not len(ann) or not len(launch):
        return np.zeros((0, 2), dtype=np.int64)
    key = thread_key(r.pid[ann], r.tid[ann])
    found = innermost_enclosing(key, r.ts[ann], r.ts[ann] + r.dur[ann],
                                thread_key(r.pid[launch], r.tid[launch]), r.ts[launch])
    ok = found >= 0
    return np.column_stack([dev[ok], ann[found[ok]]])


@dataclass(frozen=True)
class _Rows:
    """The columns every step of ``finish`` reads, as arrays (times from the origin)."""

    kind: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    corr: np.ndarray
    names: pd.Series         # categorical
    name_codes: np.ndarray
    categories: pd.Index
    is_device: np.ndarray

    @property
    def n(self) -> int:
        return len(self.kind)


@dataclass(frozen=True)
class _Links:
    """Device rows linked to the launch call that put them on the device."""

    launch_id: np.ndarray      # per row: the launch a call or device row belongs to
    device: np.ndarray         # linked device rows ...
    launch: np.ndarray         # ... and their launch call rows
    api_codes: np.ndarray      # per row: index into api_names (-1: not linked)
    api_names: np.ndarray


@dataclass(frozen=True)
class _Ops:
    """The framework op each linked device row ran for."""

    rows: np.ndarray           # op rows
    is_cast: np.ndarray        # per op row
    enclosing: np.ndarray      # per linked launch: index into rows (-1: none)
    names: pd.Categorical      # per row: the op (or hint, or user range) name
    hinted: np.ndarray         # per row: named by the parser's op_hint
    same_format: np.ndarray    # per op row: its recorded dtypes show no float change


def finish(base: pd.DataFrame, meta: TraceMeta, link_pid: str | None = None) -> Trace:
    """Derive the launch, op, step and category columns and return the ``Trace``.

    ``link_pid`` names a column giving, for runtime and device rows, the host process
    a correlation id belongs to (nsys numbers correlations per process); without it
    correlation ids are taken to be unique in the trace (Kineto, XSpace). ``base`` is the
    parser's own frame, handed over: ``finish`` empties it once sorted, so that no second
    copy of the trace's rows lives through the derivation (the peak memory of an import).
    """
    release_free_memory()  # what decoding freed, before the derivation allocates anew
    ev = moved_by_time(base)  # base emptied: its rows go now, not when the parser returns
    ev = _within_range(ev, meta)
    origin = int(ev["ts_ns"].min()) if len(ev) else 0
    meta = {**meta, "origin_ns": int(meta.get("origin_ns", 0)) + origin}
    if "dtype_change" in ev:  # the source recorded dtypes: casts are told from copies
        meta["dtypes_recorded"] = bool((ev["dtype_change"].to_numpy() >= 0).any())
    if "mem_total" in ev:
        meta.update(memory_base(ev))
    r = _rows(ev, origin)
    process = ev[link_pid].to_numpy(np.int64) if link_pid is not None \
        else np.zeros(r.n, np.int64)
    links = _link_launches(r, process)
    ops = _launch_ops(r, ev, links)
    step = _steps(r, ev["step"].to_numpy(np.int64), links)
    is_cast = _casts(r, links, ops)

    linked = np.zeros(r.n, dtype=bool)
    linked[links.device] = True
    launch_ts = np.zeros(r.n, dtype=np.int64)
    launch_dur = np.zeros(r.n, dtype=np.int64)
    launch_ts[links.device] = r.ts[links.launch]
    launch_dur[links.device] = r.dur[links.launch]
    launch_delay = _graph_delays(r, links, np.maximum(0, r.ts - (launch_ts + launch_dur)))
    out = pd.DataFrame({
        "kind": pd.Categorical.from_codes(r.kind, dtype=schema.KIND_DTYPE, validate=False),
        "name": r.names.array,
        "ts_ns": r.ts,
        "dur_ns": r.dur,
        "pid": r.pid,
        "tid": r.tid,
        "device": ev["device"].to_numpy(np.int32),
        "stream": ev["stream"].to_numpy(np.int32),
        "correlation": r.corr,
        "step": step.astype(np.int32),
        "bytes": ev["bytes"].to_numpy(np.int64),
        "launch_api": from_used_codes(links.api_codes, links.api_names),
        "launch_ts_ns": _nullable(launch_ts, linked),
        "launch_dur_ns": _nullable(launch_dur, linked),
        "launch_delay_ns": _nullable(launch_delay, linked),
        "launch_id": links.launch_id,
        "op": ops.names.remove_unused_categories(),
        "category": pd.Categorical.from_codes(
            category_codes(r.kind, r.name_codes, r.categories, is_cast),
            dtype=schema.CATEGORY_DTYPE, validate=False),
        "is_cast": is_cast,
        "details": _details(ev, r.n),
    }, copy=False)  # the arrays are this function's own: no second copy of each column
    return Trace(events=out, meta=meta)


def memory_base(ev: pd.DataFrame) -> TraceMeta:
    """``{"memory_base": {device: bytes}}``: what each device's allocator held before the
    trace's first memory event (its total after the event less the event's size), so
    that base + the running sum of sizes is the allocator's total at every event."""
    mem = ev[(ev["kind"] == "memory").to_numpy()]
    first = mem.drop_duplicates("device")  # each device's first event, total or not
    first = first[first["mem_total"].to_numpy() >= 0]
    if not len(first):
        return {}
    return {"memory_base": {str(int(d)): int(t) - int(b) for d, t, b in zip(
        first["device"], first["mem_total"], first["bytes"], strict=True)}}


def _rows(ev: pd.DataFrame, origin: int) -> _Rows:
    kind = kind_codes(ev["kind"])
    names = ev["name"].astype("category")
    # mangled symbols (ROCm, CUTLASS) read as C++ signatures, once per distinct name
    names = names.cat.rename_categories(demangled_categories(names.cat.categories))
    return _Rows(
        kind=kind, ts=ev["ts_ns"].to_numpy(np.int64) - origin,
        dur=ev["dur_ns"].to_numpy(np.int64), pid=ev["pid"].to_numpy(np.int64),
        tid=ev["tid"].to_numpy(np.int64), corr=ev["correlation"].to_numpy(np.int64),
        names=names, name_codes=names.cat.codes.to_numpy(), categories=names.cat.categories,
        is_device=np.isin(kind, [_K[k] for k in schema.DEVICE_KINDS]))


def _link_launches(r: _Rows, process: np.ndarray) -> _Links:
    """Launch calls -> device rows, by (process, correlation id): the key every analysis
    joins on."""
    # per distinct name (the last entry stands for rows without one)
    base_names = np.array([base_api_name(str(c)) for c in r.categories.tolist()] + [""],
                          dtype=object)
    api_names, api_of_name = np.unique(base_names, return_inverse=True)
    api_known = np.array([launch_kind(b) is not None for b in api_names], dtype=bool)
    api_of_row = api_of_name[r.name_codes]
    calls = np.flatnonzero((r.kind == _K["runtime"]) & api_known[api_of_row])
    launch_rows, call_ids = _launch_calls(calls, process, r.corr, r.ts, r.dur)
    launch_id = np.full(r.n, -1, dtype=np.int64)
    launch_id[calls] = call_ids
    device_rows = np.flatnonzero(r.is_device & (r.corr >= 0))
    hit = _pair_indexer(process[launch_rows], r.corr[launch_rows],
                        process[device_rows], r.corr[device_rows])
    linked_dev = device_rows[hit >= 0]
    linked_launch = launch_rows[hit[hit >= 0]]
    launch_id[linked_dev] = launch_id[linked_launch]
    api_codes = np.full(r.n, -1, dtype=np.int32)
    api_codes[linked_dev] = api_of_row[linked_launch]
    return _Links(launch_id, linked_dev, linked_launch, api_codes, api_names)


def _graph_delays(r: _Rows, links: _Links, delay: np.ndarray) -> np.ndarray:
    """``delay`` (start - launch end), where a row's launch is a graph launch measured from
    the end of the graph's rows before it instead (the latest end among them): the
    graph's first row waits for the call, the others for the graph."""
    graph_api = np.array([is_graph_launch(str(a)) for a in links.api_names], dtype=bool)
    rows = links.device[graph_api[links.api_codes[links.device]]] if len(graph_api) \
        else links.device[:0]
    if not len(rows):
        return delay
    rows = rows[np.lexsort((r.ts[rows], links.launch_id[rows]))]
    ids = links.launch_id[rows]
    end = r.ts[rows] + r.dur[rows]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    prev_end = _running_max_per_group(end, starts)
    later = np.ones(len(rows), dtype=bool)
    later[starts] = False
    out = delay.copy()
    out[rows[later]] = np.maximum(0, r.ts[rows[later]] - prev_end[later])
    return out


def _running_max_per_group(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per position, the max of ``values`` over the earlier positions of its group (groups
    are runs beginning at ``starts``; a group's first position gets its own value)."""
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(values)]))
    running = pd.Series(values).groupby(group).cummax().to_numpy(np.int64)
    shifted = np.empty_like(running)
    shifted[1:] = running[:-1]
    shifted[starts] = values[starts]
    return shifted


def _pair_indexer(a1: np.ndarray, b1: np.ndarray, a2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    """Position of each (a2, b2) among the distinct pairs (a1, b1), -1 where absent."""
    if len(a1) and (a1 == a1[0]).all() and (a2 == a1[0]).all():
        return pd.Index(b1).get_indexer(b2)  # one process (Kineto, XSpace): no pairs needed
    return pd.MultiIndex.from_arrays([a1, b1]).get_indexer(pd.MultiIndex.from_arrays([a2, b2]))


def _launch_ops(r: _Rows, ev: pd.DataFrame, links: _Links) -> _Ops:
    """The innermost framework op around each launch; else the parser's op hint; else
    the innermost user range (NVTX ranges of TensorRT layers, record_function / user
    ranges without ATen ops inside)."""
    op_rows = np.flatnonzero(r.kind == _K["op"])
    op_name_codes = r.name_codes[op_rows]
    parent, launch_op = parents_and_enclosing(
        r.pid[op_rows], r.tid[op_rows], r.ts[op_rows], r.dur[op_rows],
        r.pid[links.launch], r.tid[links.launch], r.ts[links.launch])
    change = ev["dtype_change"].to_numpy(np.int8)[op_rows] if "dtype_change" in ev \
        else np.full(len(op_rows), -1, np.int8)
    op_is_cast = _cast_ops(r.categories, op_name_codes, parent, change)
    has_op = launch_op >= 0
    op_codes = np.full(r.n, -1, dtype=np.int32)
    op_codes[links.device[has_op]] = op_name_codes[launch_op[has_op]]
    hinted = np.zeros(r.n, dtype=bool)
    if "op_hint" in ev:
        hint = ev["op_hint"].astype(str).to_numpy()
        hinted = r.is_device & (op_codes < 0) & (hint != "")
    ranged = _enclosing_annotation(r, links.device[~has_op], links.launch[~has_op])
    ranged = ranged[~hinted[ranged[:, 0]]] if len(ranged) else ranged
    op_codes[ranged[:, 0]] = r.name_codes[ranged[:, 1]]  # range names are trace names too
    op_names = pd.Categorical.from_codes(op_codes, categories=r.categories, validate=False)
    if hinted.any():
        op_names = pd.Categorical(np.where(hinted, hint, op_names.astype(object)))
    return _Ops(op_rows, op_is_cast, launch_op, op_names, hinted, change == 0)


def _steps(r: _Rows, given_step: np.ndarray, links: _Links) -> np.ndarray:
    """Each row's step: the step row around it, for a device row the step around its
    launch; a step the parser already knows (>= 0) is kept."""
    step = given_step.copy()
    step_rows = np.flatnonzero(r.kind == _K["step"])
    if not len(step_rows):
        return step
    given = given_step >= 0
    s_start = r.ts[step_rows]
    s_end = s_start + r.dur[step_rows]
    others = np.flatnonzero(r.kind != _K["step"])
    if (s_start[1:] >= s_end[:-1]).all():  # the usual case: steps one after another
        k = np.searchsorted(s_start, r.ts[others], side="right") - 1
        inside = np.where((k >= 0) & (r.ts[others] < s_end[np.maximum(k, 0)]), k, -1)
    else:
        inside = innermost_enclosing(np.zeros(len(step_rows), np.int64), s_start, s_end,
                                     np.zeros(len(others), np.int64), r.ts[others])
    step[others] = np.where(inside >= 0, step[step_rows][np.maximum(inside, 0)], -1)
    step[links.device] = step[links.launch]  # wherever the device ran it
    step[given] = given_step[given]
    return step


def _casts(r: _Rows, links: _Links, ops: _Ops) -> np.ndarray:
    """Cast rows: a kernel whose name says so or launched by a cast op (or hinted as
    one), and the cast ops themselves."""
    is_kernel = r.kind == _K["kernel"]
    is_cast = is_kernel & per_distinct(r.names, classify.cast_kernel_flags, fill=False)
    has_op = ops.enclosing >= 0
    # a copy kernel named "...WithCast" that an op launched whose recorded dtypes keep the
    # floating-point format (int -> long, float -> float) converts no precision
    same = np.zeros(r.n, dtype=bool)
    same[links.device[has_op]] = ops.same_format[ops.enclosing[has_op]]
    is_cast &= ~same
    cast_launch = np.zeros(r.n, dtype=bool)
    cast_launch[links.device[has_op]] = ops.is_cast[ops.enclosing[has_op]]
    is_cast |= cast_launch & is_kernel
    if ops.hinted.any():
        cast_hint = np.isin(np.asarray(ops.names.astype(object)), list(classify.CAST_OPS))
        is_cast |= ops.hinted & cast_hint & is_kernel
    is_cast[ops.rows] = ops.is_cast
    return is_cast
