"""Integers read from untrusted files: exact, range-checked, never wrapped.

A value that is a number but cannot be represented in the column (an id beyond 64 bits,
a device number beyond 32, a float timestamp of 1e30) is *out of range*: the parsers
drop such an event and count it in a note rather than wrap it into a wrong value. A value
that is not a number at all ("0x0", null) reads as the column's default.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa

INT64 = (-(2 ** 63), 2 ** 63 - 1)
INT32 = (-(2 ** 31), 2 ** 31 - 1)


def checked_ints(values: list | pd.Series | np.ndarray, default: int = -1,
                 bounds: tuple[int, int] = INT64) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values, out-of-range mask); missing or non-numeric entries -> ``default``."""
    lo, hi = bounds
    fast = _fast(values)
    if fast is not None:
        out, missing = fast
        bad = ~missing & ((out < lo) | (out > hi))
        return np.where(missing | bad, default, out), bad
    # odd values somewhere (huge ints, floats, text): exact, one value at a time; only
    # files with such values pay for it
    seq = values.tolist() if hasattr(values, "tolist") else list(values)
    out = np.full(len(seq), default, dtype=np.int64)
    bad = np.zeros(len(seq), dtype=bool)
    for i, v in enumerate(seq):
        number = _as_int(v)
        if number is None:
            continue
        if not isinstance(number, int) or not lo <= number <= hi:  # _OUT or out of range
            bad[i] = True
        else:
            out[i] = number
    return out, bad


_OUT = object()  # a number no integer column can hold (inf)


def _as_int(v: object) -> int | object | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        if math.isnan(v) or (math.isfinite(v) and not float(v).is_integer()):
            return None  # 1.5 is no id: unknown, like a missing one
        return int(v) if math.isfinite(v) else _OUT
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if isinstance(v, str):
        s = v.strip()
        if s.lstrip("+-").isdigit():
            return int(s)
    return None


def _fast(values) -> tuple[np.ndarray, np.ndarray] | None:
    """int64 and a missing mask when every value is an int64 or null, else None."""
    if isinstance(values, pd.Series):
        if values.dtype.kind == "i":
            return values.to_numpy(np.int64), np.zeros(len(values), dtype=bool)
        if values.dtype.kind == "f":
            f = values.to_numpy(np.float64)
            missing = np.isnan(f)
            whole = ~missing & np.isfinite(f) & (np.floor(f) == f) & (np.abs(f) < 2.0 ** 62)
            if (whole | missing).all():
                return np.where(missing, 0, f).astype(np.int64), missing
            return None
        values = values.tolist()
    try:
        arr = pa.array(values, type=pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        return None
    missing = arr.is_null().to_numpy(zero_copy_only=False)
    return arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), missing


def dropped_note(counts: dict[str, int], what: str = "events") -> list[str]:
    """Notes for rows a parser dropped, by reason."""
    return [f"{n:,} {what if n != 1 else what.rstrip('s')} dropped: {reason}"
            for reason, n in counts.items() if n]
