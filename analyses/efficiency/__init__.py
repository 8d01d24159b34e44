"""FLOPs and bytes against the device's peaks: per op (``ops.py``), grouped through
integer codes (``groups.py``), from the run's workload where ops give none (``workload.py``).

The package keeps the import path of its head, once one module.
"""

from traceviz.analyses.efficiency.ops import Efficiency, efficiency

__all__ = ["Efficiency", "efficiency"]
