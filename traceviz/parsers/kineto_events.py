"""Kineto events -> base columns: the typed event layout and how each column is read.

``kineto.py`` cuts the event array into pieces and decodes each with ``EVENTS`` (in
worker processes for large files); ``event_columns`` turns one piece's events into the base
rows ``normalize.finish`` takes, and counts what it had to drop or alter.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from traceviz.parsers.kineto_args import _NO_RAW, _details, _dtype_change, _gather
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
# torch.profiler(profile_memory=True)'s allocator events: instants of this category
MEMORY_EVENT = ("i", "cpu_instant_event")
MEMORY_NAME = "[memory]"
# an allocation's size or an allocator's total beyond 4 PiB is no real one: the event is
# dropped (and counted) so that running totals stay within int64
MEMORY_BOUNDS = (-(2**52), 2**52)
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


_NO_DETAILS = pd.CategoricalDtype([""])  # the details column of a parse that skips them


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
    # a [memory] instant event (profile_memory=True): the allocation's size (negative: a
    # free), the allocator's total after it, and where
    mem_bytes: int | float | str | bool | None = msgspec.field(default=None, name="Bytes")
    mem_total: int | float | str | bool | None = msgspec.field(default=None,
                                                               name="Total Allocated")
    mem_device: int | float | str | bool | None = msgspec.field(default=None, name="Device Id")


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
    code_of = {key: _cat_code(key[1]) if key[0] == "X" else
               _K["memory"] if key == MEMORY_EVENT else -1 for key in set(ph_cat)}
    code = np.fromiter(map(code_of.__getitem__, ph_cat), dtype=np.int8, count=len(events))
    idx = np.flatnonzero(code >= 0)
    if len(idx) == 0:
        return pd.DataFrame(), counts
    kept = _gather(events, idx)
    code = code[idx]
    memory = code == _K["memory"]
    if memory.any():  # instant events of that category other than [memory]: not kept
        other = memory & (np.asarray(list(map(attrgetter("name"), kept)), dtype=object)
                          != MEMORY_NAME)
        if other.any():
            kept = _gather(kept, np.flatnonzero(~other))
            code = code[~other]
            memory = memory[~other]
        if not len(kept):
            return pd.DataFrame(), counts
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
    dur, no_dur, dur_bad = raw_us_to_ns(list(map(attrgetter("dur"), kept)))
    bad |= ts_bad | (dur_bad & ~memory)
    dur[memory] = 0  # an instant
    nbytes = _ints(list(map(attrgetter("bytes"), args)), bad)
    mem_total = np.full(len(kept), -1, dtype=np.int64)
    if memory.any():
        rows = np.flatnonzero(memory)
        margs = _gather(args, rows)
        mbad = np.zeros(len(rows), dtype=bool)
        size, size_bad = checked_ints(list(map(attrgetter("mem_bytes"), margs)), default=0,
                                      bounds=MEMORY_BOUNDS)
        nbytes[rows] = size
        mbad |= size_bad
        mem_total[rows] = _ints(list(map(attrgetter("mem_total"), margs)), mbad,
                                bounds=MEMORY_BOUNDS)
        device[rows] = _ints(list(map(attrgetter("mem_device"), margs)), mbad)
        bad[rows] |= mbad
        on_device[rows] = False
    counts[NEGATIVE] += int((dur < 0).sum())
    frame = pd.DataFrame({
        "kind": pd.Categorical.from_codes(kind, dtype=KIND_DTYPE, validate=False),
        "name": names,
        "ts_ns": ts,
        "dur_ns": np.maximum(dur, 0),
        "pid": np.where(on_device, -1, pid),
        "tid": np.where(on_device, -1, tid),
        "device": np.where(on_device | memory, device, -1).astype(np.int32),
        "stream": np.where(on_device, stream, -1).astype(np.int32),
        "correlation": _ints(list(map(attrgetter("correlation"), args)), bad),
        "step": step,
        "bytes": nbytes,
        "details": _details(names, kind == _K["kernel"], kind == _K["op"], args) if details
        else pd.Categorical.from_codes(np.zeros(len(kept), np.int8), dtype=_NO_DETAILS,
                                       validate=False),
        "dtype_change": _dtype_change(names, args),
        "mem_total": mem_total,
    })
    drop = no_ts | bad
    counts[NO_TIME] += int((no_ts & ~bad).sum())
    counts[OUT_OF_RANGE] += int(bad.sum())
    return (frame[~drop] if drop.any() else frame), counts
