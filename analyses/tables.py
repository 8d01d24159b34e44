"""The three query tables of ``analyze --export``: kernels, launches, casts.

``launch_id`` joins kernels.parquet and casts.parquet to launches.parquet.
"""

from __future__ import annotations

import pandas as pd

from traceviz.analyses.casts import cast_rows
from traceviz.analyses.launch import launch_table
from traceviz.analyses.work import work_rows
from traceviz.trace import Trace

KERNEL_COLUMNS = [
    "name", "category", "kind", "ts_ns", "dur_ns", "device", "stream", "step", "correlation",
    "launch_id", "launch_api", "launch_ts_ns", "launch_dur_ns", "launch_delay_ns", "op",
    "is_cast", "details",
]


def export_tables(trace: Trace) -> dict[str, pd.DataFrame]:
    """``{"kernels": ..., "launches": ..., "casts": ...}`` ready to write as Parquet."""
    work = work_rows(trace)
    kernels = work if trace.is_cpu else work[work["kind"] == "kernel"]
    # one row per cast, as analyze counts them: cast kernels (cast leaf ops on a CPU)
    casts = cast_rows(work)
    return {
        "kernels": _plain(kernels[KERNEL_COLUMNS]),
        "launches": launch_table(trace),
        "casts": _plain(casts[KERNEL_COLUMNS]),
    }


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Drop unused categories so each file carries only its own dictionary."""
    out = df.reset_index(drop=True).copy()
    for col in out.columns:
        if isinstance(out[col].dtype, pd.CategoricalDtype):
            out[col] = out[col].cat.remove_unused_categories()
    return out
