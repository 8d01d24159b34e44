"""The compiled Kineto reader (``traceviz.parsers._kineto_native``, built from
``kineto_native.c`` at install where a C compiler is found): which reader is used, and
its column buffers as ``raw.Rows``, wrapped without copying.

``TRACEVIZ_READER=python`` forces the Python reader, ``native`` requires the compiled
one; by default the compiled one is used when it imports. Where it answers None (input it
does not replicate exactly: invalid JSON, a field of the wrong type, a lone surrogate...),
or a value it set aside does not decode, the Python reader decodes the piece: its result
and its error message are the Python reader's by construction.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from traceviz.errors import TraceVizError
from traceviz.parsers.kineto.events import INT_KEYS, RAW_ARGS
from traceviz.parsers.kineto.raw import NativeArgs, NativeInts, Rows

_native: ModuleType | None
try:
    from traceviz.parsers import _kineto_native as _native
    _MISSING = ""
except ImportError as e:  # not built (no C compiler at install) or not loadable
    _native = None
    _MISSING = str(e)

READERS = ("native", "python")
_ODD = msgspec.json.Decoder(int | float | str | bool | None)


def reader() -> str:
    """The Kineto reader this process uses: ``TRACEVIZ_READER`` (``native`` or
    ``python``), else the compiled one when it imports."""
    asked = os.environ.get("TRACEVIZ_READER", "").strip().lower()
    if asked and asked not in READERS:
        raise TraceVizError(f"TRACEVIZ_READER={asked}: expected one of {', '.join(READERS)}")
    if asked == "native" and _native is None:
        raise TraceVizError("TRACEVIZ_READER=native: the compiled Kineto reader is not "
                            f"built (no C compiler at install?): {_MISSING}")
    return asked or ("native" if _native is not None else "python")


def ascii_count() -> Callable[[bytes, bytes], tuple[bool, int]] | None:
    """The compiled ``ascii_count`` (``isascii`` and ``count`` without the GIL), where it
    is the reader used (``reader``); None: ``plan.whole_document`` checks in Python."""
    return _native.ascii_count if _native is not None and reader() == "native" else None


def reader_note() -> str:
    """One line for ``traceviz env``: the Kineto reader used, and why not the compiled one
    where it is not (a ``TRACEVIZ_READER`` that cannot be met raises, as ``reader``)."""
    used = reader()
    if used == "native":
        return "Kineto reader: compiled (traceviz.parsers._kineto_native)"
    if _native is not None:
        return "Kineto reader: Python (TRACEVIZ_READER=python; the compiled one is built)"
    return ("Kineto reader: Python; the compiled one is not built (no C compiler at "
            f"install? reinstall traceviz where one is): {_MISSING}")


def _strings(parts: tuple, n: int) -> pa.Array:
    off, data, valid = (pa.py_buffer(b) for b in parts)
    return pa.StringArray.from_buffers(n, off, data, valid)


def _binary(parts: tuple, n: int, kind: pa.DataType | None = None) -> pa.Array:
    off, data = (pa.py_buffer(b) for b in parts)
    return pa.Array.from_buffers(kind or pa.binary(), n, [None, off, data])


def native_columns(data: bytes, document: bool = False, done: tuple | None = None
                   ) -> tuple[pa.Array, pa.Array, Rows, dict[str, Any]] | None:
    """ph, cat, the raw columns of every event, and (``document``) the document keys the
    parser keeps, decoded; None where the Python reader must decode ``data``. ``done``:
    the compiled reader's answer for ``data``, where it was read already (``prefetch``),
    as a 1-tuple."""
    assert _native is not None
    out = _native.read_events(data, document=document) if done is None else done[0]
    if out is None:
        return None
    n = out["n"]
    objs: dict[str, np.ndarray] = {}
    odd = np.frombuffer(out["odd"], dtype=np.int64).reshape(-1, 4)
    try:
        for row, field, start, end in odd.tolist():
            # a float, text, true/false or a big integer: decoded as msgspec does
            key = _native.INT_FIELDS[field]
            if key not in objs:
                objs[key] = np.full(n, None, dtype=object)
            objs[key][row] = _ODD.decode(data[start:end])
        meta = {k: msgspec.json.decode(data[s:e]) for k, (s, e) in out.get("meta", {}).items()}
    except msgspec.DecodeError:  # 1e400: msgspec's own error, from the Python reader
        return None
    ints = {INT_KEYS[k]: NativeInts(np.frombuffer(out[k][0], dtype=np.int64),
                                    np.frombuffer(out[k][1], dtype=np.uint8), objs.get(k))
            for k in _native.INT_FIELDS}
    args = NativeArgs({attr: _binary(out[key], n) for key, attr in RAW_ARGS.items()})
    # ts and dur as text: valid UTF-8 by the reader's checks, so no cast checks it again;
    # and as ns where the reader converted every value of the column
    exact = {}
    for key in ("ts", "dur"):
        if out[f"{key}_ns"] is not None:
            off = np.frombuffer(out[key][0], dtype=np.int32)
            exact[key] = (np.frombuffer(out[f"{key}_ns"], dtype=np.int64), off[1:] == off[:-1])
    rows = Rows(_strings(out["name"], n), _binary(out["ts"], n, pa.string()),
                _binary(out["dur"], n, pa.string()), ints, args, exact or None)
    return _strings(out["ph"], n), _strings(out["cat"], n), rows, meta
