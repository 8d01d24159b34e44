"""Kineto op and kernel args -> the ``details`` and ``dtype_change`` columns: launch
configurations, recorded shapes and dtypes, decoded once per distinct value. The args are
read from either reader's raw columns (``raw.Args``: a binary column of raw JSON text per
field, asked for at the rows that use it)."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from traceviz.opcost import CONCRETE_OPS
from traceviz.parsers.kineto.raw import Args
from traceviz.table.classify import SCALAR_TYPES, precision_change

# joins a row's raw fields into one key: JSON text holds no NUL byte
_NUL = b"\0"


def _distinct(columns: list[pa.Array]) -> tuple[np.ndarray, list[tuple]]:
    """Rows of raw JSON fields (binary arrays) -> (code per row, the distinct combinations
    in order of first appearance): rows are keyed by their fields joined with NUL (JSON
    text holds none), in Arrow; Python work is once per distinct combination."""
    kind = columns[0].type  # one reader's columns share their type
    columns = [c if c.type == kind else c.cast(kind) for c in columns]
    keys = pc.binary_join_element_wise(*columns, pa.scalar(_NUL, kind))
    enc = keys.dictionary_encode()
    inverse = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return inverse, [tuple(k.split(_NUL)) for k in enc.dictionary.to_pylist()]


def _kernel_details(is_kernel: np.ndarray, args: Args, counts: Counter) -> pd.Categorical:
    """``regs:R shm:S grid:X,Y,Z block:X,Y,Z`` for kernels whose args give a launch
    configuration, then the collective's message where one is recorded; decoded once per
    distinct configuration."""
    rows = np.flatnonzero(is_kernel)
    codes = np.full(len(is_kernel), -1, dtype=np.int64)
    text = [""]
    if len(rows):
        inverse, combos = _distinct([args.column(f, rows)
                                     for f in ("regs", "shm", "grid", "block", *_COMM)])
        comm = _checked_messages([c[4:] for c in combos], inverse, counts)
        text = [" ".join(filter(None, (_details_text(*c[:4]), m)))
                for c, m in zip(combos, comm, strict=True)]
        codes[rows] = inverse
    cats, remap = _first_seen(text + [""])
    return pd.Categorical.from_codes(remap[codes], categories=cats, validate=False)


def _details(names: pd.Categorical, is_kernel: np.ndarray, is_op: np.ndarray,
             args: Args, counts: Counter) -> pd.Categorical:
    """Kernels: their launch configuration; ops: their recorded input dims and types
    (record_shapes), and for the ops whose formula reads scalar arguments
    (``opcost.CONCRETE_OPS``) their Concrete Inputs: the efficiency figures' FLOPs and
    bytes, advise's tensor-core rule."""
    details = _kernel_details(is_kernel, args, counts)
    rows = np.flatnonzero(is_op)
    if not len(rows):
        return details
    return _comm_op_details(names, rows, args, _op_details(names, rows, args, details), counts)


def _op_details(names: pd.Categorical, rows: np.ndarray, args: Args,
                details: pd.Categorical) -> pd.Categorical:
    dims = args.column("input_dims", rows)
    if not pc.any(pc.greater(pc.binary_length(dims), 0)).as_py():
        return details
    categories = names.categories.tolist()
    keeps = np.isin(np.asarray(categories, dtype=object), CONCRETE_OPS)
    wanted = keeps[names.codes[rows]] & (names.codes[rows] >= 0)
    concrete = args.column("concrete", rows)
    concrete = pc.if_else(pa.array(wanted), concrete, pa.scalar(b"", concrete.type))
    inverse, combos = _distinct([dims, args.column("input_type", rows), concrete])
    text = [(f"dims:{d.decode()} types:{t.decode()}"
             + (f" concrete:{c.decode()}" if c else "")) if d else "" for d, t, c in combos]
    codes = details.codes.astype(np.int64)
    old = details.categories.tolist()
    codes[rows] = len(old) + inverse
    cats, remap = _first_seen(old + text)
    return pd.Categorical.from_codes(remap[codes], categories=cats, validate=False)


# a collective's message fields, as Kineto names them on record_param_comms and kernels
_COMM = ("in_nelems", "out_nelems", "msg_dtype", "group_size", "pg_name", "coll_name")
_COMM_OPS = ("record_param_comms",)


# a collective's element counts and group size are kept when they are counts (whole
# numbers of 0 or more, as Kineto writes them) and its size in bytes (up to 16 an element,
# ComplexDouble's) stays within int64: 2^59 elements are 576 PB at one byte each. Any
# other value is no real message: dropped and counted, never wrapped or guessed
MAX_NELEMS = (2 ** 63 - 1) // 16
BAD_MESSAGE = ('a collective\'s "In msg nelems", "Out msg nelems" or "Group size" that is '
               "no count or is past 64-bit figures (its message size left unknown)")
_BAD = "\0bad"  # comm_text's answer for such a message (no real text holds NUL)


def _is_count(v: Any, bound: int) -> bool:
    """Absent (no field, null), or a whole number of 0 to ``bound`` (not true or 8.0)."""
    return v is None or v == "" or type(v) is int and 0 <= v <= bound


@functools.lru_cache(maxsize=1 << 12)
def comm_text(in_n: bytes, out_n: bytes, dtype: bytes, group: bytes, pg: bytes,
              coll: bytes = b"") -> str:
    """``msg:IN,OUT dtype:D group:N pg:NAME coll:NAME``: a collective's message as
    recorded (nothing where Kineto recorded none); ``analyses/summary/collectives.py`` reads it
    back. ``_BAD`` where a count is not one or past ``MAX_NELEMS``, or the group past int64."""
    if not in_n and not out_n:
        return ""
    try:
        def one(raw: bytes) -> Any:
            return msgspec.json.decode(raw) if raw else ""
        i, o, d, g, p, c = map(one, (in_n, out_n, dtype, group, pg, coll))
    except msgspec.DecodeError:
        return ""
    if not (_is_count(i, MAX_NELEMS) and _is_count(o, MAX_NELEMS)
            and _is_count(g, 2 ** 63 - 1)):
        return _BAD
    i, o, g = ("" if v is None else v for v in (i, o, g))
    if i == "" and o == "":  # both null: none recorded
        return ""
    return f"msg:{i},{o} dtype:{d} group:{g} pg:{p}" + (f" coll:{c}" if c else "")


def _checked_messages(combos: list[tuple], inverse: np.ndarray, counts: Counter
                      ) -> list[str]:
    """``comm_text`` of each distinct message; the rows of one that is no count or too
    big to hold are counted under ``BAD_MESSAGE`` and keep no message."""
    text = [comm_text(*c[:6]) for c in combos]
    big = np.array([t == _BAD for t in text], dtype=bool)
    if big.any():
        counts[BAD_MESSAGE] += int(big[inverse].sum())
        text = ["" if b else t for t, b in zip(text, big.tolist(), strict=True)]
    return text


def _comm_op_details(names: pd.Categorical, rows: np.ndarray, args: Args,
                     details: pd.Categorical, counts: Counter) -> pd.Categorical:
    """record_param_comms ops: their message text (the host's record of a collective:
    the only one a CPU backend such as Gloo leaves)."""
    wanted = np.flatnonzero(np.isin(np.asarray(names.categories, dtype=object), _COMM_OPS))
    rows = rows[np.isin(names.codes[rows], wanted)]
    if not len(rows):
        return details
    inverse, combos = _distinct([args.column(f, rows) for f in _COMM])
    text = _checked_messages(combos, inverse, counts)
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


def _dtype_change(names: pd.Categorical, args: Args) -> np.ndarray:
    """Per row: 1 when an ATen copy/conversion changes the floating-point precision,
    0 when its recorded dtypes show it does not, -1 when unknown (no record_shapes)."""
    out = np.full(len(names), -1, dtype=np.int8)
    wanted = np.flatnonzero(np.isin(np.asarray(names.categories, dtype=object), _DTYPE_OPS))
    rows = np.flatnonzero(np.isin(names.codes, wanted))
    if not len(rows):
        return out
    types = args.column("input_type", rows)
    categories = pa.array([str(c).encode() for c in names.categories.tolist()],
                          type=types.type)
    row_names = categories.take(names.codes[rows])
    inverse, combos = _distinct([row_names, types,
                                 args.column("concrete", rows),
                                 args.column("input_dims", rows)])
    per_key = np.array([dtype_change_of(n.decode(), t, c, d) for n, t, c, d in combos],
                       dtype=np.int8)
    out[rows] = per_key[inverse]
    return out


def dtype_change_of(name: str, input_type: bytes, concrete: bytes,
                    input_dims: bytes = b"") -> int:
    """See ``_dtype_change``: copy_'s types are [dst, src]; _to_copy/to name the target
    dtype by its ScalarType code in the second concrete input. A 0-dim tensor converted
    (an optimizer's step count or a Python float made a tensor: Adam converts several per
    step) is bookkeeping, not data changing precision: 0."""
    try:
        types = msgspec.json.decode(input_type) if input_type else None
        values = msgspec.json.decode(concrete) if concrete else None
        dims = msgspec.json.decode(input_dims) if input_dims else None
    except msgspec.DecodeError:
        return -1
    if not isinstance(types, list) or len(types) < 1:
        return -1
    source = 1 if name == "aten::copy_" else 0  # the converted tensor's position
    if isinstance(dims, list) and len(dims) > source and dims[source] == []:
        return 0
    if name == "aten::copy_":
        if len(types) < 2:
            return -1
        return precision_change(str(types[1]), str(types[0]))
    if not isinstance(values, list) or len(values) < 2 or not str(values[1]).isdigit():
        return -1
    target = SCALAR_TYPES.get(int(values[1]))
    return -1 if target is None else precision_change(str(types[0]), target)


