"""Pure functions over a ``Trace``: they return tables and small dataclasses, never print."""

from traceviz.analyses.summary import Summary, summarize

__all__ = ["Summary", "summarize"]
