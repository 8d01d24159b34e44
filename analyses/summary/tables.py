"""The query tables of ``analyze --export`` and of the notebook API (``Trace.kernels()``
and friends): kernels, launches, casts, ops, phases.

``launch_id`` joins kernels.parquet and casts.parquet to launches.parquet; the schemas are
in docs/formats.md ("Exported tables").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.optree import op_tree
from traceviz.analyses.summary.casts import cast_rows
from traceviz.analyses.summary.launch import launch_table
from traceviz.analyses.summary.phases import NO_PHASE, assign_phases, phase_ranges, phase_table
from traceviz.analyses.work import analysis_windows, wall_windows, work_rows
from traceviz.table.exports import KERNEL_COLUMNS, OP_COLUMNS

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace



Work = tuple[pd.DataFrame, np.ndarray, np.ndarray]  # work rows, wall-window starts, ends


def _work(trace: Trace) -> Work:
    """What every table starts from, made once per export."""
    work = work_rows(trace)
    ws, we = wall_windows(analysis_windows(trace, work))
    return work, ws, we


def kernel_rows(trace: Trace, w: Work | None = None) -> pd.DataFrame:
    """Kernels (GPU trace) or the leaf ops that play them (CPU trace), with their phase."""
    work, ws, we = w or _work(trace)
    phase = assign_phases(work, phase_ranges(trace, ws, we))
    work = work.assign(phase=pd.Categorical(phase))
    kernels = work if trace.is_cpu else work[work["kind"] == "kernel"]
    return _plain(kernels[KERNEL_COLUMNS])


def cast_table(trace: Trace) -> pd.DataFrame:
    """One row per cast, as analyze counts them: cast kernels (cast leaf ops on a CPU)."""
    return cast_rows(kernel_rows(trace)).reset_index(drop=True)


def op_table(trace: Trace, w: Work | None = None) -> pd.DataFrame:
    """Framework op rows with their nesting: ``depth``, ``is_leaf``, ``self_ns``, ``parent``
    (row number of the enclosing op in this table, -1 at the top) and ``is_work`` (the
    op is a unit of work: on a CPU trace, one of the rows ``kernels()`` returns)."""
    ev = trace.events
    ops = ev[ev["kind"] == "op"]
    tree = op_tree(ops)
    work = (w or _work(trace))[0] if trace.is_cpu else None
    out = ops.assign(**tree, is_work=ops.index.isin(work.index) if work is not None else False)
    return _plain(out[OP_COLUMNS])


def phases_of(trace: Trace, w: Work | None = None) -> pd.DataFrame:
    """The per-phase table of ``analyze`` (``phases.phase_table``) for a whole trace."""
    work, ws, we = w or _work(trace)
    return phase_table(trace, work, ws, we)


def export_tables(trace: Trace, peak: Any = None) -> dict[str, pd.DataFrame]:
    """The tables by name, in the order of ``table.exports.EXPORTS`` (the files ``analyze
    --export`` writes; a test holds the two together), ready to write as Parquet
    (``peak``: a ``peaks.Peak`` for the efficiency table's % of peak)."""
    from traceviz.analyses.efficiency.ops import efficiency
    from traceviz.analyses.summary.footprint import memory

    w = _work(trace)
    kernels = kernel_rows(trace, w)
    eff = efficiency(trace, peak).groups
    return {
        "kernels": kernels,
        "launches": launch_table(trace),
        "casts": cast_rows(kernels).reset_index(drop=True),
        "ops": op_table(trace, w),
        "phases": phases_of(trace, w),
        "efficiency": eff.astype({c: "float64" for c in ("tflops", "gbps", "intensity",
                                                         "pct_peak", "pct_bw")}),
        "memory": memory(trace).series.astype("int64"),
        **range_tables(trace),
    }


def range_tables(trace: Trace) -> dict[str, pd.DataFrame]:
    """``ranges``: the Ranges section's table (per name and style); ``range_instances``:
    every range with its thread, nesting (``parent`` a row of this table, -1) and the
    device work launched inside it (``proj_start_ns``/``proj_ns`` -1 where none)."""
    from traceviz.analyses.summary.ranges.instances import device_work, projection, range_rows
    from traceviz.analyses.summary.ranges.per_name import range_table

    rows = range_rows(trace)
    proj = projection(rows, device_work(trace, rows))
    inst = rows.copy()
    for col in ("proj_start_ns", "proj_ns", "gpu_ops", "kernels", "kernel_ns"):
        fill = -1 if col.startswith("proj") else 0
        inst[col] = (proj[col].reindex(np.arange(len(rows)), fill_value=fill)
                     .to_numpy(np.int64) if len(proj) else np.full(len(rows), fill))
    return {"ranges": range_table(rows, proj), "range_instances": _plain(inst)}


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Drop unused categories so each file carries only its own dictionary."""
    out = df.reset_index(drop=True).copy()
    for col in out.columns:
        if isinstance(out[col].dtype, pd.CategoricalDtype):
            out[col] = out[col].cat.remove_unused_categories()
    return out


__all__ = ["NO_PHASE", "cast_table", "export_tables", "kernel_rows", "op_table",
           "phases_of"]
