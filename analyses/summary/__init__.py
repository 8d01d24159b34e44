"""Analyze's sections and the Summary that holds them.

The face keeps the import path of ``traceviz.analyses.summary`` (once one module): the
names of ``figures.py``; the sections are registered in ``registry.py``.
"""

from traceviz.analyses.summary.figures import Summary, integer_ns, summarize
from traceviz.analyses.summary.modules import MODULE_FIGURES

__all__ = ["MODULE_FIGURES", "Summary", "integer_ns", "summarize"]
