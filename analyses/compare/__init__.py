"""Several traces side by side: runs (``runs.py``), FP32 against mixed precision
(``amp_breakdown.py``, ``amp_precision.py``), the ranks of one job (``ranks.py``).

The package keeps the import path of its head, once one module.
"""

from traceviz.analyses.compare.runs import RunFigures, kernel_diff, mpe_table, run_figures

__all__ = ["RunFigures", "kernel_diff", "mpe_table", "run_figures"]
