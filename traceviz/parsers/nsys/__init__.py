"""Nsight Systems exports and reports read into a ``Trace``: ``nsys_reader.py`` turns the
export's tables into rows (``parse``), ``table_access.py`` opens an export whatever its container
(SQLite, Arrow, a folder of tables), ``guard.py`` bounds its SQLite queries and lets a
signal end them, ``nvtx.py`` reads what an NVTX range carries beside
its name (domain, style, category, payload), ``export.py`` runs Nsight Systems' own
tools to make an SQLite export of a report, and ``apart.py`` holds whether NVTX ranges are
read apart. ``parse`` is imported on first use: setting that flag imports no reader."""

from typing import Any

__all__ = ["parse"]


def __getattr__(name: str) -> Any:
    if name == "parse":
        from traceviz.parsers.nsys.nsys_reader import parse

        return parse
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
