"""Kineto events -> base columns: the typed event layout and how each column is read.

``kineto.py`` cuts the event array into pieces and decodes each with ``EVENTS`` (in
worker processes for large files); ``event_columns`` turns one piece's events into the base
rows ``normalize.finish`` takes, and counts what it had to drop or alter.
"""

from __future__ import annotations

import functools
from collections import Counter
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from traceviz.classify import MATRIX_OPS, SCALAR_TYPES, precision_change
from traceviz.parsers.numbers import INT32, INT64, checked_ints
from traceviz.schema import DEVICE_KINDS, KIND_DTYPE, KINDS
from traceviz.steps import PROFILER_STEP, step_numbers

# Kineto category (lower-cased; PyTorch 1.8 wrote "Kernel", "Runtime", ...) -> kind
CATEGORY_KIND = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "runtime": "runtime",
    "driver": "runtime",
    "cpu_op": "op",
    "operator": "op",
    "user_annotation": "annotation",
    "gpu_user_annotation": "annotation",
}


_K = {k: i for i, k in enumerate(KINDS)}
_DEVICE_CODES = [_K[k] for k in DEVICE_KINDS]

# a category -> its kind's code; -1: not kept; gpu_user_annotation (an annotation on a
# device timeline) has a code of its own
_GPU_ANNOTATION = len(KINDS)


def _cat_code(cat: str | None) -> int:
    if cat is None:
        return -1
    low = cat.lower()  # PyTorch 1.8 wrote "Kernel", "Runtime", ...
    if low == "gpu_user_annotation":
        return _GPU_ANNOTATION
    return _K[CATEGORY_KIND[low]] if low in CATEGORY_KIND else -1


_NO_RAW = msgspec.Raw(b"")  # one shared default: an absent field allocates nothing
_NO_DETAILS = pd.CategoricalDtype([""])  # the details column of a parse that skips them
# joins a row's raw fields into one key: JSON text holds no NUL byte
_NUL = b"\0"


# gc=False: millions of small structs, no cycles; the GC need not track them
class _Args(msgspec.Struct, gc=False):
    correlation: int | float | str | bool | None = None
    device: int | float | str | bool | None = None
    stream: int | float | str | bool | None = None
    bytes: int | float | str | bool | None = None
    # kept as raw JSON and decoded once per distinct value, for the few rows that use them
    grid: msgspec.Raw = _NO_RAW
    block: msgspec.Raw = _NO_RAW
    regs: msgspec.Raw = msgspec.field(default=_NO_RAW, name="registers per thread")
    shm: msgspec.Raw = msgspec.field(default=_NO_RAW, name="shared memory")
    input_type: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Concrete Inputs")
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")


class _Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | float | str | bool | None = None
    tid: int | float | str | bool | None = None
    ts: msgspec.Raw = _NO_RAW
    dur: msgspec.Raw = _NO_RAW
    args: _Args | None = None


EVENTS = msgspec.json.Decoder(list[_Event])


class _Document(msgspec.Struct, gc=False):
    """A whole Kineto document, for a file small enough to decode at once: the event
    array and the metadata the parser keeps (UNSET: the key is absent); other keys are
    skipped."""

    traceEvents: list[_Event] | msgspec.UnsetType = msgspec.UNSET
    deviceProperties: Any = msgspec.UNSET
    schemaVersion: Any = msgspec.UNSET
    distributedInfo: Any = msgspec.UNSET
    baseTimeNanoseconds: Any = msgspec.UNSET
    traceName: Any = msgspec.UNSET


DOCUMENT = msgspec.json.Decoder(_Document)


def _ints(values: list, bad: np.ndarray, fallback: np.ndarray | None = None,
          bounds: tuple[int, int] = INT64) -> np.ndarray:
    """int64 column, -1 where missing or not a number (Kineto mixes "0x0" strings in);
    numbers out of ``bounds`` are marked in ``bad`` (their events are dropped)."""
    out, out_of_range = checked_ints(values, bounds=bounds)
    bad |= out_of_range
    if fallback is not None:
        out = np.where(out < 0, fallback, out)
    return out


# |µs| below this converts to int64 ns with room to spare (about 292 years)
_MAX_US = 9_000_000_000_000_000


def raw_array(raws: list) -> pa.Array:
    """Raw JSON values (``msgspec.Raw``, bytes) -> one Arrow binary array, built from one
    joined buffer and their lengths (no Python object per value)."""
    n = len(raws)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, raws), dtype=np.int64, count=n), out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [
        None, pa.py_buffer(offsets), pa.py_buffer(b"".join(raws))])


# ns as the unscaled value of a decimal with 3 fractional digits (µs.nnn)
_NS_DECIMAL = pa.decimal128(38, 3)


def _decimal_us_to_ns(text: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """int64 ns and the out-of-range mask when every value is a JSON number with at most
    3 decimals (Kineto writes µs with ns fractions): one C++ cast to a decimal whose
    unscaled value is the ns. None when any value is absent or spelled otherwise."""
    try:
        dec = pc.cast(text, _NS_DECIMAL)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if dec.null_count:
        return None
    words = np.frombuffer(dec.buffers()[1], dtype=np.int64,
                          count=2 * len(dec), offset=16 * dec.offset).reshape(-1, 2)
    ns, high = words[:, 0], words[:, 1]
    # the 128-bit value is an int64 when its high word is the low word's sign
    huge = (high != (ns >> 63)) | (np.abs(ns) >= _MAX_US * 1000)
    return np.where(huge, 0, ns), huge


def raw_us_to_ns(raws: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact int64 ns from raw JSON numbers in µs (``b"12.345"`` -> 12345).

    Returns the values, a mask of entries that were absent or not numbers, and a mask
    of numbers int64 ns cannot hold (``1e30``, 21 digits): never wrapped.
    """
    text = raw_array(raws).cast(pa.large_string())
    n = len(text)
    fast = _decimal_us_to_ns(text)
    if fast is not None:
        return fast[0], np.zeros(n, dtype=bool), fast[1]
    neg = pc.starts_with(text, "-")
    parts = pc.extract_regex(pc.replace_substring(text, "-", ""), r"^(?P<i>\d+)(?:\.(?P<f>\d*))?$")
    whole = pc.struct_field(parts, "i")
    too_long = pc.fill_null(pc.greater(pc.utf8_length(whole), 16), False)
    whole = pc.if_else(too_long, "0", whole)
    us = pc.cast(whole, pa.int64())
    huge = pc.fill_null(pc.or_(too_long, pc.greater_equal(us, _MAX_US)), False)
    us = pc.if_else(huge, 0, us)
    fpart = pc.utf8_rpad(pc.struct_field(parts, "f"), 4, "0")
    ns = pc.add(pc.multiply(us, 1000), pc.cast(pc.utf8_slice_codeunits(fpart, 0, 3), pa.int64()))
    # round half up on the fourth decimal (sub-ns digits)
    round_up = pc.greater_equal(pc.utf8_slice_codeunits(fpart, 3, 4), "5")
    ns = pc.add(ns, pc.cast(round_up, pa.int64()))
    ns = pc.if_else(neg, pc.negate(ns), ns)
    missing = ns.is_null().to_numpy(zero_copy_only=False)
    out = pc.fill_null(ns, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    bad = huge.to_numpy(zero_copy_only=False).astype(bool)
    if missing.any():
        # exponent notation and other spellings: float parsing (sub-µs exactness lost)
        odd = pd.to_numeric(pc.filter(text, pa.array(missing)).to_pandas(), errors="coerce")
        us_f = odd.to_numpy(dtype=float)
        rows = np.flatnonzero(missing)
        number = ~np.isnan(us_f)
        fits = number & np.isfinite(us_f) & (np.abs(us_f) < _MAX_US)
        out[rows[fits]] = np.round(us_f[fits] * 1000).astype(np.int64)
        bad[rows[number & ~fits]] = True
        missing[rows[number]] = False
    return out, missing, bad


def _categorical(values: list) -> pd.Categorical:
    """Strings -> Categorical via Arrow's hash table (pandas' own path is slower)."""
    enc = pa.array(values, type=pa.string()).dictionary_encode()
    codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32)
    return pd.Categorical.from_codes(codes, categories=pd.Index(
        enc.dictionary.to_numpy(zero_copy_only=False), dtype=object), validate=False)


def _gather(seq: list, idx: np.ndarray) -> list:
    if len(idx) == 1:
        return [seq[int(idx[0])]]
    return list(itemgetter(*idx)(seq))


def _distinct(columns: list[list]) -> tuple[np.ndarray, list[tuple]]:
    """Rows of raw JSON fields -> (code per row, the distinct combinations in order of
    first appearance): rows are keyed by their fields joined with NUL (JSON text holds
    none), in C; Python work is once per distinct combination."""
    keys = list(map(_NUL.join, zip(*columns, strict=True)))
    position = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    inverse = np.fromiter(map(position.__getitem__, keys), dtype=np.int64, count=len(keys))
    return inverse, [tuple(k.split(_NUL)) for k in position]


def _kernel_details(is_kernel: np.ndarray, args: list[_Args]) -> pd.Categorical:
    """``regs:R shm:S grid:X,Y,Z block:X,Y,Z`` for kernels whose args give a launch
    configuration; decoded once per distinct configuration."""
    rows = np.flatnonzero(is_kernel)
    codes = np.full(len(args), -1, dtype=np.int64)
    text = [""]
    if len(rows):
        ka = _gather(args, rows)
        inverse, combos = _distinct([list(map(attrgetter(f), ka))
                                     for f in ("regs", "shm", "grid", "block")])
        text = [_details_text(*c) for c in combos]
        codes[rows] = inverse
    cats, remap = _first_seen(text + [""])
    return pd.Categorical.from_codes(remap[codes], categories=cats, validate=False)


def _details(names: pd.Categorical, is_kernel: np.ndarray, is_op: np.ndarray,
             args: list[_Args]) -> pd.Categorical:
    """Kernels: their launch configuration; matrix ops (``classify.MATRIX_OPS``): their
    recorded input dims and types (record_shapes), for advise's tensor-core rule."""
    details = _kernel_details(is_kernel, args)
    wanted = np.flatnonzero(np.isin(np.asarray(names.categories, dtype=object), MATRIX_OPS))
    rows = np.flatnonzero(np.isin(names.codes, wanted) & is_op)
    if not len(rows):
        return details
    ra = _gather(args, rows)
    inverse, combos = _distinct([list(map(attrgetter("input_dims"), ra)),
                                 list(map(attrgetter("input_type"), ra))])
    text = [f"dims:{d.decode()} types:{t.decode()}" if d else "" for d, t in combos]
    codes = details.codes.astype(np.int64)
    old = details.categories.tolist()
    codes[rows] = len(old) + inverse
    cats, remap = _first_seen(old + text)
    return pd.Categorical.from_codes(remap[codes], categories=cats, validate=False)


def _first_seen(texts: list[str]) -> tuple[pd.Index, np.ndarray]:
    """The distinct texts in order of first appearance, and each text's position among
    them (a few texts: a dict beats building and probing an Index)."""
    position: dict[str, int] = {}
    remap = np.fromiter((position.setdefault(t, len(position)) for t in texts),
                        dtype=np.int64, count=len(texts))
    return pd.Index(list(position)), remap


# launch configurations repeat across the ranks of a job: one decoding per process
@functools.lru_cache(maxsize=1 << 16)
def _details_text(regs: bytes, shm: bytes, grid: bytes, block: bytes) -> str:
    if not grid or not block:
        return ""
    try:
        g, b = msgspec.json.decode(grid), msgspec.json.decode(block)
        dims = f"grid:{','.join(str(int(v)) for v in g)} block:{','.join(str(int(v)) for v in b)}"
    except (msgspec.DecodeError, TypeError, ValueError):
        return ""
    return f"regs:{regs.decode() or '?'} shm:{shm.decode() or '?'} {dims}"


# ATen ops whose recorded input types tell whether they convert between dtypes
_DTYPE_OPS = ("aten::_to_copy", "aten::to", "aten::copy_")


def _dtype_change(names: pd.Categorical, args: list[_Args]) -> np.ndarray:
    """Per row: 1 when an ATen copy/conversion changes the floating-point precision,
    0 when its recorded dtypes show it does not, -1 when unknown (no record_shapes)."""
    out = np.full(len(args), -1, dtype=np.int8)
    wanted = np.flatnonzero(np.isin(np.asarray(names.categories, dtype=object), _DTYPE_OPS))
    rows = np.flatnonzero(np.isin(names.codes, wanted))
    if not len(rows):
        return out
    ra = _gather(args, rows)
    categories = names.categories.tolist()
    row_names = [str(categories[c]).encode() for c in names.codes[rows].tolist()]
    inverse, combos = _distinct([row_names, list(map(attrgetter("input_type"), ra)),
                                 list(map(attrgetter("concrete"), ra))])
    per_key = np.array([dtype_change_of(n.decode(), t, c) for n, t, c in combos],
                       dtype=np.int8)
    out[rows] = per_key[inverse]
    return out


def dtype_change_of(name: str, input_type: bytes, concrete: bytes) -> int:
    """See ``_dtype_change``: copy_'s types are [dst, src]; _to_copy/to name the target
    dtype by its ScalarType code in the second concrete input."""
    try:
        types = msgspec.json.decode(input_type) if input_type else None
        values = msgspec.json.decode(concrete) if concrete else None
    except msgspec.DecodeError:
        return -1
    if not isinstance(types, list) or len(types) < 1:
        return -1
    if name == "aten::copy_":
        if len(types) < 2:
            return -1
        return precision_change(str(types[1]), str(types[0]))
    if not isinstance(values, list) or len(values) < 2 or not str(values[1]).isdigit():
        return -1
    target = SCALAR_TYPES.get(int(values[1]))
    return -1 if target is None else precision_change(str(types[0]), target)


# why _columns drops or alters an event, as parse's notes say it
OUT_OF_RANGE = ("a number out of range (an id beyond 64 bits, a device or stream beyond 32, "
                "a time beyond 64-bit nanoseconds)")
NO_TIME = "no timestamp, or one that is not a number"
NEGATIVE = "a negative duration (read as 0)"
BIG_STEP = "a ProfilerStep number beyond 32 bits (kept as an annotation)"


def event_columns(events: list[_Event], details: bool = True) -> tuple[pd.DataFrame, Counter]:
    """Base columns (see ``traceviz.normalize``) for the kept events of one chunk, and
    counts of what was dropped or altered and why. ``details=False``: the details column
    is left empty (figures that never read it, such as a rank folder's, skip its cost)."""
    counts: Counter = Counter()
    if not events:
        return pd.DataFrame(), counts
    ph_cat = list(map(attrgetter("ph", "cat"), events))
    # kind code per distinct (ph, cat): a few of them; -1: an event not kept
    code_of = {key: _cat_code(key[1]) if key[0] == "X" else -1 for key in set(ph_cat)}
    code = np.fromiter(map(code_of.__getitem__, ph_cat), dtype=np.int8, count=len(events))
    idx = np.flatnonzero(code >= 0)
    if len(idx) == 0:
        return pd.DataFrame(), counts
    kept = _gather(events, idx)
    code = code[idx]
    gpu_annotation = code == _GPU_ANNOTATION
    kind = np.where(gpu_annotation, _K["annotation"], code).astype(np.int8)
    names = _categorical(list(map(attrgetter("name"), kept)))
    args = list(map(attrgetter("args"), kept))
    empty = _Args()
    args = [a if a is not None else empty for a in args] if None in args else args

    bad = np.zeros(len(kept), dtype=bool)
    pid = _ints(list(map(attrgetter("pid"), kept)), bad)
    tid = _ints(list(map(attrgetter("tid"), kept)), bad)
    device = _ints(list(map(attrgetter("device"), args)), bad, fallback=pid)
    stream = _ints(list(map(attrgetter("stream"), args)), bad, fallback=tid)
    # gpu_user_annotation rows sit on a device timeline: pid = device, tid = stream
    on_device = np.isin(kind, _DEVICE_CODES) | gpu_annotation
    bad |= on_device & ((device < INT32[0]) | (device > INT32[1])
                        | (stream < INT32[0]) | (stream > INT32[1]))
    number, too_long = step_numbers(names.categories, PROFILER_STEP)
    step = np.append(number, -1)[names.codes]
    counts[BIG_STEP] += int(too_long[names.codes[names.codes >= 0]].sum())
    # PyTorch <= 1.9 records ProfilerStep#N as an operator, later ones as a user annotation
    is_step = (step >= 0) & ((kind == _K["annotation"]) | (kind == _K["op"]))
    kind[is_step] = _K["step"]
    step = np.where(is_step, step, -1)

    ts, no_ts, ts_bad = raw_us_to_ns(list(map(attrgetter("ts"), kept)))
    dur, _, dur_bad = raw_us_to_ns(list(map(attrgetter("dur"), kept)))
    bad |= ts_bad | dur_bad
    counts[NEGATIVE] += int((dur < 0).sum())
    frame = pd.DataFrame({
        "kind": pd.Categorical.from_codes(kind, dtype=KIND_DTYPE, validate=False),
        "name": names,
        "ts_ns": ts,
        "dur_ns": np.maximum(dur, 0),
        "pid": np.where(on_device, -1, pid),
        "tid": np.where(on_device, -1, tid),
        "device": np.where(on_device, device, -1).astype(np.int32),
        "stream": np.where(on_device, stream, -1).astype(np.int32),
        "correlation": _ints(list(map(attrgetter("correlation"), args)), bad),
        "step": step,
        "bytes": _ints(list(map(attrgetter("bytes"), args)), bad),
        "details": _details(names, kind == _K["kernel"], kind == _K["op"], args) if details
        else pd.Categorical.from_codes(np.zeros(len(kept), np.int8), dtype=_NO_DETAILS,
                                       validate=False),
        "dtype_change": _dtype_change(names, args),
    })
    drop = no_ts | bad
    counts[NO_TIME] += int((no_ts & ~bad).sum())
    counts[OUT_OF_RANGE] += int(bad.sum())
    return (frame[~drop] if drop.any() else frame), counts
