"""What bounds each step: device, host, ranks.

The face keeps the import path of ``traceviz.analyses.critical_path`` (once one module): the
names of ``path.py``.
"""

from traceviz.analyses.critical_path.path import (
    PARTS,
    CriticalPath,
    Points,
    ancestors,
    binding,
    critical_path,
    path_of,
    removed_from_path,
)

__all__ = [
    "CriticalPath", "PARTS", "Points", "ancestors", "binding", "critical_path", "path_of",
    "removed_from_path",
]
