"""Several traces side by side: runs, FP32 vs AMP, ranks of a job.

The face keeps the import path of ``traceviz.analyses.compare`` (once one module): the
names of ``runs.py``.
"""

from traceviz.analyses.compare.runs import (
    CHANGES,
    LIKE_FOR_LIKE,
    MATRIX_CATEGORIES,
    RunFigures,
    kernel_diff,
    mean_percentage_error,
    mpe_table,
    ordering_conflicts,
    peak_memory,
    run_figures,
    tensor_core_share,
    workload_differences,
)

__all__ = [
    "CHANGES", "LIKE_FOR_LIKE", "MATRIX_CATEGORIES", "RunFigures", "kernel_diff",
    "mean_percentage_error", "mpe_table", "ordering_conflicts", "peak_memory", "run_figures",
    "tensor_core_share", "workload_differences",
]
