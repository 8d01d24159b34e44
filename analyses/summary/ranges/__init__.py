"""User ranges (NVTX, record_function, TraceMe) as Nsight Systems' reports summarize them:
the Ranges section, time per range name (``per_name.py``: ``nvtxsum``); the ranges one by
one, nested, with the device work launched inside them (``instances.py``:
``nvtxgpuproj``); the kernels per range (``per_kernel.py``: ``nvtxkernsum``).

The package keeps the import path of its head, once one module.
"""

from traceviz.analyses.summary.ranges.per_name import (
    SECTION,
    RangeFigures,
    range_figures,
    range_table,
)

__all__ = ["SECTION", "RangeFigures", "range_figures", "range_table"]
