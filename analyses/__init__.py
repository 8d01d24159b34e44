"""Pure functions over a ``Trace``: they return tables and small dataclasses, never print."""

from traceviz.analyses.summary.figures import Summary, summarize

__all__ = ["Summary", "summarize"]
