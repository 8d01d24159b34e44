"""The trace's dependency graph, solved and measured.

The face keeps the import path of ``traceviz.analyses.replay`` (once one module): the
names of ``graph.py``.
"""

from traceviz.analyses.replay.graph import (
    MAX_PASSES,
    NEVER,
    WAIT_SLACK_NS,
    ReplayGraph,
    Solution,
    build,
    per_device,
    solve,
)

__all__ = [
    "MAX_PASSES", "NEVER", "ReplayGraph", "Solution", "WAIT_SLACK_NS", "build", "per_device",
    "solve",
]
