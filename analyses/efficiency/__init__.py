"""FLOPs and bytes against the device's peaks.

The face keeps the import path of ``traceviz.analyses.efficiency`` (once one module): the
names of ``ops.py``.
"""

from traceviz.analyses.efficiency.ops import (
    MATRIX_CATEGORIES,
    OVER_PEAK,
    Efficiency,
    efficiency,
    op_of_kernels,
)

__all__ = ["Efficiency", "MATRIX_CATEGORIES", "OVER_PEAK", "efficiency", "op_of_kernels"]
