"""Kineto events -> base columns: the typed event layout and how each column is read.

``kineto.py`` cuts the event array into pieces and decodes each with ``EVENTS`` (in
worker processes for large files); ``event_columns`` turns one piece's events into the base
rows ``normalize.finish`` takes, and counts what it had to drop or alter.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from traceviz.parsers.kineto_args import _NO_RAW, _details, _dtype_change, _gather
from traceviz.parsers.numbers import INT32, INT64, checked_ints
from traceviz.table.schema import DEVICE_KINDS, KIND_DTYPE, KINDS
from traceviz.table.steps import PROFILER_STEP, step_numbers

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


def _kind_codes(ph: list, cat: list) -> np.ndarray:
    """Per event: its kind's code (``_GPU_ANNOTATION`` for a device-side annotation), or
    -1 for an event not kept; looked up per distinct ph and cat."""
    n = len(ph)
    ph_at = {v: i for i, v in enumerate(set(ph))}
    cat_at = {v: i for i, v in enumerate(set(cat))}
    p = np.fromiter(map(ph_at.__getitem__, ph), dtype=np.int32, count=n)
    c = np.fromiter(map(cat_at.__getitem__, cat), dtype=np.int32, count=n)
    complete = np.array([v == "X" for v in ph_at], dtype=bool)[p]
    cat_code = np.array([_cat_code(v) for v in cat_at], dtype=np.int8)[c]
    memory = np.array([v == MEMORY_EVENT[0] for v in ph_at], dtype=bool)[p] & \
        np.array([v == MEMORY_EVENT[1] for v in cat_at], dtype=bool)[c]
    return np.where(complete, cat_code, np.where(memory, _K["memory"], -1)).astype(np.int8)


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
    # a collective's message (record_param_comms and, on newer PyTorch, its kernel)
    in_nelems: msgspec.Raw = msgspec.field(default=_NO_RAW, name="In msg nelems")
    out_nelems: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Out msg nelems")
    msg_dtype: msgspec.Raw = msgspec.field(default=_NO_RAW, name="dtype")
    group_size: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Group size")
    pg_name: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Process Group Name")
    coll_name: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Collective name")
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


def raw_array(raws: list, absent_null: bool = False) -> pa.Array:
    """Raw JSON values (``msgspec.Raw``, bytes) -> one Arrow binary array, built from one
    joined buffer and their lengths (no Python object per value); ``absent_null``: an
    absent value (no bytes) is null, not empty."""
    n = len(raws)
    offsets = np.zeros(n + 1, dtype=np.int64)
    lengths = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    np.cumsum(lengths, out=offsets[1:])
    absent = lengths == 0
    valid = pa.py_buffer(np.packbits(~absent, bitorder="little")) \
        if absent_null and absent.any() else None
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [
        valid, pa.py_buffer(offsets), pa.py_buffer(b"".join(raws))])


# ns as the unscaled value of a decimal with 3 fractional digits (µs.nnn)
_NS_DECIMAL = pa.decimal128(38, 3)


def _decimal_us_to_ns(text: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """int64 ns (0 where absent), the absent mask and the out-of-range mask when every
    value present (not null) is a JSON number with at most 3 decimals (Kineto writes µs
    with ns fractions): one C++ cast to a decimal whose unscaled value is the ns. None
    when any value is spelled otherwise."""
    try:
        dec = pc.cast(text, _NS_DECIMAL)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    absent = dec.is_null().to_numpy(zero_copy_only=False) if dec.null_count \
        else np.zeros(len(dec), dtype=bool)
    words = np.frombuffer(dec.buffers()[1], dtype=np.int64,
                          count=2 * len(dec), offset=16 * dec.offset).reshape(-1, 2)
    ns, high = words[:, 0], words[:, 1]
    # the 128-bit value is an int64 when its high word is the low word's sign
    huge = (high != (ns >> 63)) | (np.abs(ns) >= _MAX_US * 1000)
    huge &= ~absent  # a null's words are not its value
    return np.where(huge | absent, 0, ns), absent, huge


def raw_us_to_ns(raws: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact int64 ns from raw JSON numbers in µs (``b"12.345"`` -> 12345).

    Returns the values, a mask of entries that were absent or not numbers, and a mask
    of numbers int64 ns cannot hold (``1e30``, 21 digits): never wrapped.
    """
    fast = _decimal_us_to_ns(raw_array(raws, absent_null=True).cast(pa.large_string()))
    if fast is not None:
        return fast
    text = raw_array(raws).cast(pa.large_string())
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
# a duration written as text ("20") is not read as a number: the format writes numbers,
# and a text that looks like one is no more trustworthy than one that does not
NOT_A_DURATION = "a duration that is not a number (text, null, true...)"
NO_NAME = "no name (null)"


def event_columns(events: list[_Event], details: bool = True) -> tuple[pd.DataFrame, Counter]:
    """Base columns (see ``traceviz.parsers.normalize``) for the kept events of one chunk, and
    counts of what was dropped or altered and why. ``details=False``: the details column
    is left empty (figures that never read it, such as a rank folder's, skip its cost)."""
    counts: Counter = Counter()
    if not events:
        return pd.DataFrame(), counts
    # kind code from the distinct ph and cat values (a few of each); -1: not kept.
    # (List comprehensions: twice as fast as map(attrgetter) on structs, and no tuple
    # per event.)
    code = _kind_codes([e.ph for e in events], [e.cat for e in events])
    idx = np.flatnonzero(code >= 0)
    if len(idx) == 0:
        return pd.DataFrame(), counts
    kept = _gather(events, idx)
    code = code[idx]
    memory = code == _K["memory"]
    if memory.any():  # instant events of that category other than [memory]: not kept
        other = memory & (np.asarray([e.name for e in kept], dtype=object)
                          != MEMORY_NAME)
        if other.any():
            kept = _gather(kept, np.flatnonzero(~other))
            code = code[~other]
            memory = memory[~other]
        if not len(kept):
            return pd.DataFrame(), counts
    names = _categorical([e.name for e in kept])
    if (no_name := names.codes < 0).any():  # "name": null: dropped, and said
        counts[NO_NAME] += int(no_name.sum())
        if no_name.all():
            return pd.DataFrame(), counts
        kept = _gather(kept, np.flatnonzero(~no_name))
        code, memory = code[~no_name], memory[~no_name]
        names = _categorical([e.name for e in kept])
    gpu_annotation = code == _GPU_ANNOTATION
    kind = np.where(gpu_annotation, _K["annotation"], code).astype(np.int8)
    args = [e.args for e in kept]
    empty = _Args()
    args = [a if a is not None else empty for a in args] if None in args else args

    bad = np.zeros(len(kept), dtype=bool)
    pid = _ints([e.pid for e in kept], bad)
    tid = _ints([e.tid for e in kept], bad)
    device = _ints([e.device for e in args], bad, fallback=pid)
    stream = _ints([e.stream for e in args], bad, fallback=tid)
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

    ts, no_ts, ts_bad = raw_us_to_ns([e.ts for e in kept])
    durs = [e.dur for e in kept]
    dur, no_dur, dur_bad = raw_us_to_ns(durs)
    bad |= ts_bad | (dur_bad & ~memory)
    # an absent duration is an instant (0); a present one that is not a number is dropped
    wrong_dur = no_dur & (np.fromiter(map(len, durs), np.int64, len(durs)) > 0) & ~memory
    dur[memory] = 0  # an instant
    nbytes = _ints([e.bytes for e in args], bad)
    mem_total = np.full(len(kept), -1, dtype=np.int64)
    if memory.any():
        rows = np.flatnonzero(memory)
        margs = _gather(args, rows)
        mbad = np.zeros(len(rows), dtype=bool)
        size, size_bad = checked_ints([e.mem_bytes for e in margs], default=0,
                                      bounds=MEMORY_BOUNDS)
        nbytes[rows] = size
        mbad |= size_bad
        mem_total[rows] = _ints([e.mem_total for e in margs], mbad,
                                bounds=MEMORY_BOUNDS)
        device[rows] = _ints([e.mem_device for e in margs], mbad)
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
        "correlation": _ints([e.correlation for e in args], bad),
        "step": step,
        "bytes": nbytes,
        "details": _details(names, kind == _K["kernel"], kind == _K["op"], args, counts)
        if details
        else pd.Categorical.from_codes(np.zeros(len(kept), np.int8), dtype=_NO_DETAILS,
                                       validate=False),
        "dtype_change": _dtype_change(names, args),
        "mem_total": mem_total,
    })
    drop = no_ts | bad
    counts[NO_TIME] += int((no_ts & ~bad).sum())
    counts[OUT_OF_RANGE] += int(bad.sum())
    counts[NOT_A_DURATION] += int((wrong_dur & ~drop).sum())
    drop |= wrong_dur
    return (frame[~drop] if drop.any() else frame), counts
