"""Nsight Systems exports and reports read into a ``Trace``: ``nsys_reader.py`` turns the
export's tables into rows (``parse``), ``table_access.py`` opens an export whatever its container
(SQLite, Arrow, a folder of tables), ``guard.py`` bounds its SQLite queries and lets a
signal end them, ``nvtx.py`` reads what an NVTX range carries beside
its name (domain, style, category, payload), and ``export.py`` runs Nsight Systems' own
tools to make an SQLite export of a report."""

from traceviz.parsers.nsys.nsys_reader import parse

__all__ = ["parse"]
