"""Renderers: analysis results in, text and figures out; nothing here reads a trace or
runs an analysis. ``terminal`` (rich tables), ``charts`` (matplotlib figures),
``report`` (Markdown / self-contained HTML). Saving and printing are the CLI's."""
