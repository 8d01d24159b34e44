"""Analyze's sections and the Summary that holds them.

The face keeps the import path of ``traceviz.analyses.summary`` (once one module): the
names of ``figures.py``.
"""

from traceviz.analyses.summary.figures import (
    MODULE_FIGURES,
    Summary,
    integer_ns,
    summarize,
)

__all__ = ["MODULE_FIGURES", "Summary", "integer_ns", "summarize"]
