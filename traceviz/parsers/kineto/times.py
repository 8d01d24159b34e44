"""Kineto ``ts``/``dur`` (µs, as their raw JSON text) -> exact int64 ns, in Arrow compute:
a float64 cannot hold a 16-digit epoch in µs to the ns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

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


def _text(raws: pa.Array, absent_null: bool) -> pa.Array:
    """Raw values (binary, or text already: the compiled reader's, checked UTF-8; empty
    where absent) as text, absent ones null if asked."""
    text = raws if pa.types.is_string(raws.type) or pa.types.is_large_string(raws.type) \
        else raws.cast(pa.large_string() if pa.types.is_large_binary(raws.type)
                       else pa.string())
    if absent_null:
        absent = pc.equal(pc.binary_length(raws), 0)
        if pc.any(absent).as_py():
            text = pc.if_else(absent, pa.scalar(None, text.type), text)
    return text


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


def raw_us_to_ns(raws: list | pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact int64 ns from raw JSON numbers in µs (``b"12.345"`` -> 12345): a list of
    ``msgspec.Raw`` or a binary array of their text (empty: absent).

    Returns the values, a mask of entries that were absent or not numbers, and a mask
    of numbers int64 ns cannot hold (``1e30``, 21 digits): never wrapped.
    """
    if isinstance(raws, list):
        raws = raw_array(raws)
    fast = _decimal_us_to_ns(_text(raws, absent_null=True))
    if fast is not None:
        return fast
    text = _text(raws, absent_null=False)
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
