"""What bounds each step: the device and host chain (``path.py``), the device's work
beside it (``overlap.py``), the host's share (``hostops.py``), what a what-if scenario takes
off it (``removed.py``), across ranks the rank each collective waited for (``cross_rank.py``).

The package keeps the import path of its head, once one module.
"""

from traceviz.analyses.critical_path.path import CriticalPath, critical_path

__all__ = ["CriticalPath", "critical_path"]
