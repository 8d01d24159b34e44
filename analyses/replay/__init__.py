"""The trace's dependency graph, solved (``graph.py``), measured over the trace's
windows (``measure.py``), with the waits across streams (``stream_waits.py``).

The package keeps the import path of its head, once one module.
"""

from traceviz.analyses.replay.graph import ReplayGraph, Solution, build, solve

__all__ = ["ReplayGraph", "Solution", "build", "solve"]
