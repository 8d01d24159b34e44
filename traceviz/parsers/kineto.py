"""torch.profiler (Kineto) Chrome-trace JSON -> ``Trace``.

Decoding is typed (msgspec): only the fields we use are materialised, unknown fields
are skipped in C, and ``ts``/``dur`` are kept as their raw text so microsecond floats
with nanosecond fractions become exact int64 ns (a float64 cannot hold a 16-digit
epoch in µs to the ns). Columns are then built with C-level ``map`` and Arrow compute.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from operator import attrgetter, itemgetter
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pandas.api.types import union_categoricals

from traceviz.classify import SCALAR_TYPES, precision_change
from traceviz.errors import TraceVizError
from traceviz.fileio import is_gzip, open_input
from traceviz.normalize import finish
from traceviz.parsers.jsonstream import ArrayChunks, Piece, Range, decode_in_order, file_ranges
from traceviz.schema import KINDS
from traceviz.trace import Trace

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
DEVICE_SIDE = ("kernel", "memcpy", "memset")
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


_NO_RAW = msgspec.Raw(b"")  # one shared default: an absent field allocates nothing


# gc=False: millions of small structs, no cycles; the GC need not track them
class _Args(msgspec.Struct, gc=False):
    correlation: int | str | None = None
    device: int | str | None = None
    stream: int | str | None = None
    bytes: int | str | None = None
    # kept as raw JSON and decoded once per distinct value, for the few rows that use them
    grid: msgspec.Raw = _NO_RAW
    block: msgspec.Raw = _NO_RAW
    regs: msgspec.Raw = msgspec.field(default=_NO_RAW, name="registers per thread")
    shm: msgspec.Raw = msgspec.field(default=_NO_RAW, name="shared memory")
    input_type: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Concrete Inputs")


class _Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = _NO_RAW
    dur: msgspec.Raw = _NO_RAW
    args: _Args | None = None


_EVENTS = msgspec.json.Decoder(list[_Event])
CHUNK_BYTES = 16 << 20


def decode_piece(piece: Piece | Range) -> tuple[str, object]:
    """Decode one piece of the event array into base columns (runs in a worker)."""
    try:
        return "ok", _columns(_EVENTS.decode(b"[" + piece.read() + b"]"))
    except msgspec.ValidationError as e:
        return "invalid", str(e)
    except msgspec.DecodeError as e:
        return "syntax", str(e)


def _workers(path: Path) -> int:
    """Worker processes worth starting: none for small files (start-up costs ~0.5 s)."""
    size = path.stat().st_size
    if is_gzip(path):
        size *= 8  # Kineto JSON compresses about 8-20x
    if size < 8 * CHUNK_BYTES:
        return 1
    # one more than the cores: the parent mostly waits on reads and hand-offs
    return min((os.cpu_count() or 1) + 1, 8)


def parse(path: Path, progress: Callable[[int], None] | None = None,
          workers: int | None = None, chunk_bytes: int = CHUNK_BYTES) -> Trace:
    """Read a Kineto trace (plain or gzipped) into a ``Trace``.

    ``workers`` decode chunks in parallel (default: one per core for big files).
    """
    workers = _workers(path) if workers is None else workers
    # a plain file is cut by offsets and each worker reads its own range; gzip streams
    ranges = None if is_gzip(path) else file_ranges(str(path), b"traceEvents", chunk_bytes,
                                                     name=str(path))
    stream = None
    try:
        if ranges is not None:
            pieces, metadata = iter(ranges[0]), (lambda: ranges[1])
        else:
            stream = open_input(path)
            chunks = ArrayChunks(stream, b"traceEvents", chunk_bytes=chunk_bytes,
                                 name=str(path))
            pieces, metadata = iter(chunks), chunks.metadata_document
        frames = []
        for piece, frame in decode_in_order(pieces, decode_piece, workers=workers,
                                            name=str(path)):
            if progress:
                progress(piece.size)
            if len(frame):
                frames.append(frame)
        try:
            doc = msgspec.json.decode(metadata())
        except msgspec.DecodeError as e:
            raise TraceVizError(f"{path}: malformed JSON around the event array ({e})") from None
    finally:
        if stream is not None:
            stream.close()
    if not frames:
        raise TraceVizError(f"{path}: the trace holds no profiler events")
    cats = {c: union_categoricals([f.pop(c).array for f in frames]) for c in ("name", "details")}
    base = pd.concat(frames, ignore_index=True)
    for c, values in cats.items():
        base[c] = values
    return finish(base, _meta(doc if isinstance(doc, dict) else {}, path))


def _meta(doc: dict, path: Path) -> dict:
    devices = {}
    for d in doc.get("deviceProperties") or []:
        if isinstance(d, dict) and "id" in d and "name" in d:
            devices[str(d["id"])] = d["name"]
    meta = {
        "source_format": "kineto",
        "source_file": str(path),
        "profiler": "torch.profiler",
        "devices": devices,
    }
    for key in ("schemaVersion", "distributedInfo", "baseTimeNanoseconds", "traceName"):
        if key in doc:
            meta[f"kineto_{key}"] = doc[key]
    return meta


def _strings(values: list) -> pa.Array:
    return pa.array(values, type=pa.string())


def _ints(values: list, fallback: np.ndarray | None = None) -> np.ndarray:
    """int64 column, -1 where missing or not a number (Kineto mixes "0x0" strings in)."""
    try:
        arr = pa.array(values, type=pa.int64()).to_numpy(zero_copy_only=False)
        out = np.where(np.isnan(arr), -1, arr) if arr.dtype.kind == "f" else arr
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        num = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
        out = num.fillna(-1).to_numpy()
    out = np.asarray(out, dtype=np.int64)
    if fallback is not None:
        out = np.where(out < 0, fallback, out)
    return out


def raw_us_to_ns(raws: list) -> tuple[np.ndarray, np.ndarray]:
    """Exact int64 ns from raw JSON numbers in µs (``b"12.345"`` -> 12345).

    Returns the values and a mask of entries that were absent or not numbers.
    """
    text = pa.array(list(map(bytes, raws)), type=pa.binary()).cast(pa.string())
    if not pc.any(pc.match_substring_regex(text, r"[^0-9]|^$")).as_py():
        # plain integers (most Kineto files): µs -> ns in one C++ cast
        out = pc.multiply(pc.cast(text, pa.int64()), 1000).to_numpy(zero_copy_only=False)
        return out, np.zeros(len(out), dtype=bool)
    neg = pc.starts_with(text, "-")
    parts = pc.extract_regex(pc.replace_substring(text, "-", ""), r"^(?P<i>\d+)(?:\.(?P<f>\d*))?$")
    fpart = pc.utf8_rpad(pc.struct_field(parts, "f"), 4, "0")
    ns = pc.add(
        pc.multiply(pc.cast(pc.struct_field(parts, "i"), pa.int64()), 1000),
        pc.cast(pc.utf8_slice_codeunits(fpart, 0, 3), pa.int64()),
    )
    # round half up on the fourth decimal (sub-ns digits)
    round_up = pc.greater_equal(pc.utf8_slice_codeunits(fpart, 3, 4), "5")
    ns = pc.add(ns, pc.cast(round_up, pa.int64()))
    ns = pc.if_else(neg, pc.negate(ns), ns)
    missing = ns.is_null().to_numpy(zero_copy_only=False)
    out = pc.fill_null(ns, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    if missing.any():
        # exponent notation and other spellings: float parsing (sub-µs exactness lost)
        odd = pd.to_numeric(pc.filter(text, pa.array(missing)).to_pandas(), errors="coerce")
        as_ns = np.round(odd.to_numpy(dtype=float) * 1000)
        fixed = np.flatnonzero(missing)[~np.isnan(as_ns)]
        out[fixed] = as_ns[~np.isnan(as_ns)].astype(np.int64)
        missing[fixed] = False
    return out, missing


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
    """Rows of raw JSON fields -> (code per row, the distinct combinations), in C."""
    codes, uniques = [], []
    for raws in columns:
        enc = pa.array(list(map(bytes, raws)), type=pa.binary()).dictionary_encode()
        codes.append(enc.indices.to_numpy(zero_copy_only=False).astype(np.int64))
        uniques.append(enc.dictionary.to_pylist())
    key = np.zeros(len(codes[0]), dtype=np.int64)
    for c, u in zip(codes, uniques, strict=True):
        key = key * len(u) + c
    keys, inverse = np.unique(key, return_inverse=True)
    combos = []
    for k in keys.tolist():  # once per distinct combination
        parts = []
        for u in reversed(uniques):
            k, i = divmod(k, len(u))
            parts.append(u[i])
        combos.append(tuple(reversed(parts)))
    return inverse, combos


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
    cats = pd.Index(text + [""]).unique()
    remap = cats.get_indexer(text + [""])
    return pd.Categorical.from_codes(remap[codes], categories=cats)


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
    row_names = [str(v).encode() for v in np.asarray(names)[rows]]
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


def _columns(events: list[_Event]) -> pd.DataFrame:
    """Base columns (see ``traceviz.normalize``) for the kept events of one chunk."""
    if not events:
        return pd.DataFrame()
    ph = _strings(list(map(attrgetter("ph"), events)))
    cat = pc.utf8_lower(_strings(list(map(attrgetter("cat"), events))))
    kind = pc.fill_null(
        pc.take(
            pa.array(list(CATEGORY_KIND.values()) + [None]),
            pc.fill_null(pc.index_in(cat, pa.array(list(CATEGORY_KIND))), len(CATEGORY_KIND)),
        ),
        "",
    )
    keep = pc.and_(pc.equal(ph, "X"), pc.not_equal(kind, "")).to_numpy(zero_copy_only=False)
    idx = np.flatnonzero(keep)
    if len(idx) == 0:
        return pd.DataFrame()
    kept = _gather(events, idx)
    gpu_annotation = pc.take(pc.equal(cat, "gpu_user_annotation"), pa.array(idx))
    gpu_annotation = gpu_annotation.to_numpy(zero_copy_only=False)
    kind = pc.take(kind, pa.array(idx)).to_numpy(zero_copy_only=False).astype(object)
    names = _categorical(list(map(attrgetter("name"), kept)))
    args = list(map(attrgetter("args"), kept))
    empty = _Args()
    args = [a if a is not None else empty for a in args] if None in args else args

    pid = _ints(list(map(attrgetter("pid"), kept)))
    tid = _ints(list(map(attrgetter("tid"), kept)))
    device = _ints(list(map(attrgetter("device"), args)), fallback=pid)
    stream = _ints(list(map(attrgetter("stream"), args)), fallback=tid)
    # gpu_user_annotation rows sit on a device timeline: pid = device, tid = stream
    on_device = np.isin(kind, DEVICE_SIDE) | gpu_annotation
    step_of_name = pd.Series(names.categories, dtype=object).str.extract(STEP_NAME, expand=False)
    step_of_name = np.append(pd.to_numeric(step_of_name).fillna(-1).to_numpy(np.int64), -1)
    step = step_of_name[names.codes]
    # PyTorch <= 1.9 records ProfilerStep#N as an operator, later ones as a user annotation
    is_step = (step >= 0) & ((kind == "annotation") | (kind == "op"))
    kind[is_step] = "step"
    step = np.where(is_step, step, -1)

    ts, no_ts = raw_us_to_ns(list(map(attrgetter("ts"), kept)))
    dur, _ = raw_us_to_ns(list(map(attrgetter("dur"), kept)))
    frame = pd.DataFrame({
        "kind": pd.Categorical(kind, categories=KINDS),
        "name": names,
        "ts_ns": ts,
        "dur_ns": np.maximum(dur, 0),
        "pid": np.where(on_device, -1, pid),
        "tid": np.where(on_device, -1, tid),
        "device": np.where(on_device, device, -1).astype(np.int32),
        "stream": np.where(on_device, stream, -1).astype(np.int32),
        "correlation": _ints(list(map(attrgetter("correlation"), args))),
        "step": step,
        "bytes": _ints(list(map(attrgetter("bytes"), args))),
        "details": _kernel_details(kind == "kernel", args),
        "dtype_change": _dtype_change(names, args),
    })
    return frame[~no_ts] if no_ts.any() else frame
