"""The events table: column names, types and the fixed vocabularies (see DESIGN.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

# 2: launch_id (the one launch link); category "attention"
SCHEMA_VERSION = 2

# memory: an allocator event (torch.profiler's profile_memory): ``bytes`` its signed size
# (negative: a free), ``device`` where (-1: host memory); the totals follow from
# ``meta["memory_base"]`` (docs/metrics.md, "Memory")
# os: what a host thread did outside the runtime, where the profiler records it (nsys: an
# OS runtime call, or a stretch the thread was scheduled out, ``[off-CPU]``); sample: a
# CPU sample of a host thread (``dur_ns`` 0), named by the program's own function it ran
KINDS = ("kernel", "memcpy", "memset", "runtime", "op", "annotation", "step", "memory", "os",
         "sample")
DEVICE_KINDS = ("kernel", "memcpy", "memset")
CATEGORIES = (
    "gemm", "attention", "rnn", "elementwise", "reduction", "cast",
    "memcpy", "memset", "communication", "other",
)

# Integer columns use -1 for "not applicable"; launch columns are nullable because
# a kernel whose launch call fell outside the window has no launch at all.
INT_COLUMNS: dict[str, str] = {
    "ts_ns": "int64",
    "dur_ns": "int64",
    "pid": "int64",
    "tid": "int64",
    "device": "int32",
    "stream": "int32",
    "correlation": "int64",
    "step": "int32",
    "bytes": "int64",
    # a launch call's id on its runtime row(s) and on the device rows it launched
    "launch_id": "int64",
}
NULLABLE_INT_COLUMNS = ("launch_ts_ns", "launch_dur_ns", "launch_delay_ns")
BOOL_COLUMNS = ("is_cast",)

COLUMNS = (
    "kind", "name", "ts_ns", "dur_ns", "pid", "tid", "device", "stream", "correlation",
    "step", "bytes", "launch_api", "launch_ts_ns", "launch_dur_ns", "launch_delay_ns",
    "launch_id", "op", "category", "is_cast", "details",
)
# Columns added after schema version 1 shipped: a file without one reads as the default.
# details: the source's launch configuration of a kernel ("regs:38 shm:0 grid:160,1,1
# block:1024,1,1" from an XSpace's kernel_details), "" where the source gives none.
OPTIONAL_COLUMNS: dict[str, str] = {"details": ""}


KIND_DTYPE = pd.CategoricalDtype(list(KINDS))
CATEGORY_DTYPE = pd.CategoricalDtype(list(CATEGORIES))


def is_in(column: pd.Series, *values: str) -> np.ndarray:
    """Rows of a ``kind`` or ``category`` column whose value is one of ``values``, read
    from the codes when the column has the schema's dtype (as every events table has):
    comparing text costs several times more, and a small rank asks this a dozen times."""
    vocab = KINDS if column.dtype == KIND_DTYPE else \
        CATEGORIES if column.dtype == CATEGORY_DTYPE else None
    if vocab is None:
        return column.isin(values).to_numpy()
    wanted = np.zeros(len(vocab) + 1, dtype=bool)  # the last entry: a missing value (-1)
    wanted[[vocab.index(v) for v in values if v in vocab]] = True
    return wanted[column.array.codes]


def conforms(events: pd.DataFrame) -> bool:
    """The table has exactly the schema's columns, in order, with their dtypes (a file
    traceviz wrote): nothing to convert or check."""
    if list(events.columns) != list(COLUMNS) or not isinstance(events.index, pd.RangeIndex) \
            or events.index.start != 0 or events.index.step != 1:
        return False
    for col, dtype in events.dtypes.items():
        if col in INT_COLUMNS:
            ok = dtype == INT_COLUMNS[col]
        elif col in NULLABLE_INT_COLUMNS:
            ok = dtype == "Int64"
        elif col in BOOL_COLUMNS:
            ok = dtype == np.dtype(bool)
        elif col == "kind":
            ok = dtype == KIND_DTYPE
        elif col == "category":
            ok = dtype == CATEGORY_DTYPE
        else:
            ok = isinstance(dtype, pd.CategoricalDtype)
        if not ok:
            return False
    return True


def coerce(events: pd.DataFrame) -> pd.DataFrame:
    """Return ``events`` with exactly the schema's columns and dtypes, in order (itself,
    uncopied, when it already conforms)."""
    if conforms(events):
        return events
    missing = [c for c in COLUMNS if c not in events.columns and c not in OPTIONAL_COLUMNS]
    if missing:
        raise ValueError(f"events table lacks columns: {', '.join(missing)}")
    out = {}
    for col in COLUMNS:
        if col not in events.columns:
            out[col] = pd.Series(OPTIONAL_COLUMNS[col], index=events.index, dtype="category")
            continue
        s = events[col]
        if col in INT_COLUMNS:
            s = s.astype(INT_COLUMNS[col])
        elif col in NULLABLE_INT_COLUMNS:
            s = s.astype("Int64")
        elif col in BOOL_COLUMNS:
            s = s.astype(bool)
        elif col in ("kind", "category"):
            known = list(KINDS if col == "kind" else CATEGORIES)
            present = (s.cat.remove_unused_categories().cat.categories
                       if isinstance(s.dtype, pd.CategoricalDtype) else pd.unique(s.dropna()))
            unknown = {str(v) for v in present} - set(known)
            if unknown:
                raise ValueError(f"column {col} holds unknown values: "
                                 f"{', '.join(sorted(unknown)[:3])}")
            s = s.astype(pd.CategoricalDtype(known))
        elif not isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype("category")
        out[col] = s
    return pd.DataFrame(out).reset_index(drop=True)


# text columns that may hold no value on a row (an op without a launch call, a device row
# outside any op); kind and name never lack one
NULLABLE_TEXT_COLUMNS = ("launch_api", "op", "category", "details")


def column_type_problem(fields: Any) -> str | None:
    """What is wrong with the Arrow types of a Parquet events table (a ``pyarrow.Schema``),
    worded for the user, or None: whole numbers where the schema has them, true/false in
    ``is_cast``, text (plain or dictionary-encoded) elsewhere. Checked before pandas reads
    the file, so that a wrong type is one line naming its column, not a failure deep in
    an analysis."""
    import pyarrow as pa

    for f in fields:
        t = f.type
        if pa.types.is_dictionary(t):
            t = t.value_type
        if f.name in INT_COLUMNS or f.name in NULLABLE_INT_COLUMNS:
            ok, want = pa.types.is_integer(t) or pa.types.is_null(t), "whole numbers"
        elif f.name in BOOL_COLUMNS:
            ok, want = pa.types.is_boolean(t), "true/false values"
        elif f.name in COLUMNS:
            ok, want = (pa.types.is_string(t) or pa.types.is_large_string(t)
                        or pa.types.is_null(t)), "text"
        else:
            continue
        if not ok:
            return f"column {f.name} holds {f.type} values, where the table has {want}"
    return None
