"""Kineto events -> base columns, once for both readers: the raw columns of one piece
(``raw.Rows``) -> the base rows ``normalize.finish`` takes, and counts of what had to be
dropped or altered and why.

``kineto_reader.py`` cuts the event array into pieces; the compiled reader (``native.py``) or the
Python one (``events.py``) reads each into raw columns; ``event_columns`` does the rest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from traceviz.parsers.kineto.args import _details, _dtype_change
from traceviz.parsers.kineto.raw import Ints, Rows
from traceviz.parsers.kineto.times import raw_us_to_ns
from traceviz.parsers.numbers import INT32, INT64
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


def _distinct_codes(values: pa.Array) -> tuple[np.ndarray, list]:
    """Per row: the position of its value among the distinct values (null last)."""
    enc = values.dictionary_encode()
    distinct = enc.dictionary.to_pylist() + [None]
    codes = pc.fill_null(enc.indices, len(distinct) - 1).to_numpy(zero_copy_only=False)
    return codes, distinct


def _kind_codes(ph: pa.Array, cat: pa.Array) -> np.ndarray:
    """Per event: its kind's code (``_GPU_ANNOTATION`` for a device-side annotation), or
    -1 for an event not kept; looked up per distinct ph and cat."""
    p, ph_at = _distinct_codes(ph)
    c, cat_at = _distinct_codes(cat)
    complete = np.array([v == "X" for v in ph_at], dtype=bool)[p]
    cat_code = np.array([_cat_code(v) for v in cat_at], dtype=np.int8)[c]
    memory = np.array([v == MEMORY_EVENT[0] for v in ph_at], dtype=bool)[p] & \
        np.array([v == MEMORY_EVENT[1] for v in cat_at], dtype=bool)[c]
    return np.where(complete, cat_code, np.where(memory, _K["memory"], -1)).astype(np.int8)


_NO_DETAILS = pd.CategoricalDtype([""])  # the details column of a parse that skips them


def _ints(values: Ints, bad: np.ndarray, fallback: np.ndarray | None = None,
          bounds: tuple[int, int] = INT64) -> np.ndarray:
    """int64 column, -1 where missing or not a number (Kineto mixes "0x0" strings in);
    numbers out of ``bounds`` are marked in ``bad`` (their events are dropped)."""
    out, out_of_range = values.checked(bounds=bounds)
    bad |= out_of_range
    if fallback is not None:
        out = np.where(out < 0, fallback, out)
    return out


def _categorical(values: pa.Array) -> pd.Categorical:
    """Strings -> Categorical via Arrow's hash table (pandas' own path is slower)."""
    enc = values.dictionary_encode()
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


def _kept(ph: pa.Array, cat: pa.Array, rows_of: Callable[[np.ndarray], Rows],
          counts: Counter) -> tuple[Rows, np.ndarray, np.ndarray, pd.Categorical] | None:
    """The events kept, their kind codes, which are memory events, and their names; None
    where none is kept. Events without a name are dropped and counted."""
    if not len(ph):
        return None
    # kind code from the distinct ph and cat values (a few of each); -1: not kept
    code = _kind_codes(ph, cat)
    idx = np.flatnonzero(code >= 0)
    if len(idx) == 0:
        return None
    kept = rows_of(idx)
    code = code[idx]
    memory = code == _K["memory"]
    if memory.any():  # instant events of that category other than [memory]: not kept
        other = memory & pc.fill_null(pc.not_equal(kept.name, MEMORY_NAME), True) \
            .to_numpy(zero_copy_only=False)
        if other.any():
            kept = kept.take(np.flatnonzero(~other))
            code = code[~other]
            memory = memory[~other]
        if not len(kept):
            return None
    names = _categorical(kept.name)
    if (no_name := names.codes < 0).any():  # "name": null: dropped, and said
        counts[NO_NAME] += int(no_name.sum())
        if no_name.all():
            return None
        kept = kept.take(np.flatnonzero(~no_name))
        code, memory = code[~no_name], memory[~no_name]
        names = _categorical(kept.name)
    return kept, code, memory, names


def _ns(rows: Rows, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``raw_us_to_ns`` of the ``ts`` or ``dur`` column, or the compiled reader's exact ns
    where it gave them (the same values: its plain spellings are never out of range)."""
    exact = rows.exact_ns.get(key) if rows.exact_ns else None
    if exact is None:
        return raw_us_to_ns(getattr(rows, key))
    ns, absent = exact
    # writable (the columns set some in place), and not the reader's buffer
    return ns.copy(), absent, np.zeros(len(ns), dtype=bool)


def _steps(names: pd.Categorical, kind: np.ndarray, counts: Counter) -> np.ndarray:
    """The step number of each ProfilerStep#N row (-1 elsewhere), their kind made
    ``step`` in place."""
    number, too_long = step_numbers(names.categories, PROFILER_STEP)
    step = np.append(number, -1)[names.codes]
    counts[BIG_STEP] += int(too_long[names.codes[names.codes >= 0]].sum())
    # PyTorch <= 1.9 records ProfilerStep#N as an operator, later ones as a user annotation
    is_step = (step >= 0) & ((kind == _K["annotation"]) | (kind == _K["op"]))
    kind[is_step] = _K["step"]
    return np.where(is_step, step, -1)


def _memory_rows(ints, memory: np.ndarray, nbytes: np.ndarray, device: np.ndarray,
                 bad: np.ndarray, on_device: np.ndarray) -> np.ndarray:
    """The memory events' columns, set in place (their size in ``bytes``, their device,
    no device timeline); returns the allocator's total after each (-1 elsewhere)."""
    mem_total = np.full(len(memory), -1, dtype=np.int64)
    if memory.any():
        rows = np.flatnonzero(memory)
        mbad = np.zeros(len(rows), dtype=bool)
        size, size_bad = ints["mem_bytes"].take(rows).checked(default=0, bounds=MEMORY_BOUNDS)
        nbytes[rows] = size
        mbad |= size_bad
        mem_total[rows] = _ints(ints["mem_total"].take(rows), mbad, bounds=MEMORY_BOUNDS)
        device[rows] = _ints(ints["mem_device"].take(rows), mbad)
        bad[rows] |= mbad
        on_device[rows] = False
    return mem_total


def event_columns(ph: pa.Array, cat: pa.Array, rows_of: Callable[[np.ndarray], Rows],
                  details: bool = True) -> tuple[pd.DataFrame, Counter]:
    """Base columns (see ``traceviz.parsers.normalize``) for the kept events of one piece,
    and counts of what was dropped or altered and why. ``ph``/``cat``: every event's;
    ``rows_of``: the raw columns of the events at these positions. ``details=False``: the
    details column is left empty (figures that never read it, such as a rank folder's,
    skip its cost)."""
    counts: Counter = Counter()
    found = _kept(ph, cat, rows_of, counts)
    if found is None:
        return pd.DataFrame(), counts
    kept, code, memory, names = found
    gpu_annotation = code == _GPU_ANNOTATION
    kind = np.where(gpu_annotation, _K["annotation"], code).astype(np.int8)
    n = len(kept)
    ints = kept.ints

    bad = np.zeros(n, dtype=bool)
    pid = _ints(ints["pid"], bad)
    tid = _ints(ints["tid"], bad)
    device = _ints(ints["device"], bad, fallback=pid)
    stream = _ints(ints["stream"], bad, fallback=tid)
    # gpu_user_annotation rows sit on a device timeline: pid = device, tid = stream
    on_device = np.isin(kind, _DEVICE_CODES) | gpu_annotation
    bad |= on_device & ((device < INT32[0]) | (device > INT32[1])
                        | (stream < INT32[0]) | (stream > INT32[1]))
    step = _steps(names, kind, counts)

    ts, no_ts, ts_bad = _ns(kept, "ts")
    dur, no_dur, dur_bad = _ns(kept, "dur")
    bad |= ts_bad | (dur_bad & ~memory)
    # an absent duration is an instant (0); a present one that is not a number is dropped
    wrong_dur = no_dur & (pc.binary_length(kept.dur).to_numpy(zero_copy_only=False) > 0) \
        & ~memory
    dur[memory] = 0  # an instant
    nbytes = _ints(ints["bytes"], bad)
    mem_total = _memory_rows(ints, memory, nbytes, device, bad, on_device)
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
        "correlation": _ints(ints["correlation"], bad),
        "step": step,
        "bytes": nbytes,
        "details": _details(names, kind == _K["kernel"], kind == _K["op"], kept.args, counts)
        if details
        else pd.Categorical.from_codes(np.zeros(n, np.int8), dtype=_NO_DETAILS,
                                       validate=False),
        "dtype_change": _dtype_change(names, kept.args),
        "mem_total": mem_total,
    }, copy=False)  # the arrays are this piece's own: no consolidating copy of each
    drop = no_ts | bad
    counts[NO_TIME] += int((no_ts & ~bad).sum())
    counts[OUT_OF_RANGE] += int(bad.sum())
    counts[NOT_A_DURATION] += int((wrong_dur & ~drop).sum())
    drop |= wrong_dur
    return (frame[~drop] if drop.any() else frame), counts
