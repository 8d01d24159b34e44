"""What an nsys export lacks or holds wrongly: the refusals (one line, exit 2) and the
notes (what was dropped or left out, and why) of ``nsys_reader.parse``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from traceviz.errors import TraceVizError
from traceviz.parsers.numbers import dropped_note

if TYPE_CHECKING:  # the reader imports this module
    from traceviz.parsers.nsys.nsys_reader import _Rows
    from traceviz.parsers.nsys.table_access import ExportTables

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
UNNAMED_KERNEL = "<unknown kernel>"
UNNAMED_CALL = "<unknown call>"


def check_names(tables: ExportTables, strings: pd.Series, path: Path) -> None:
    """Kernels and CUDA calls are named by string ids only: without StringIds none has a
    name, and no launch call can be told from another call. Refused, as a kernel table
    without a name column is."""
    if len(strings):
        return
    named = [t for t in (KERNEL, RUNTIME) if tables.holding_values(t, ["start"])]
    if named:
        why = "holds no string with an id" if "StringIds" in tables.names else "is missing"
        raise TraceVizError(f"{path}: table StringIds {why}, so the rows of "
                            f"{' and '.join(named)} have no names (an incomplete export; "
                            "export the report again)")


def export_notes(b: _Rows, odd_tables: list[str]) -> list[str]:
    """The notes of what the reader dropped, could not name or left out."""
    notes = dropped_note({"a value out of range (a time or id beyond 64 bits, a device or "
                          "stream beyond 32)": b.dropped,
                          "no start or end time (NULL), or an end before the start":
                          b.no_time}, "rows")
    if b.unnamed:
        notes.append(f"{b.unnamed:,} kernels have no name in the export (no string id, or "
                     f"one not in StringIds): shown as {UNNAMED_KERNEL}.")
    if b.unnamed_calls:
        notes.append(f"{b.unnamed_calls:,} CUDA calls have no name in the export (no string "
                     f"id, or one not in StringIds): shown as {UNNAMED_CALL}, so a launch "
                     "among them is not known as one.")
    notes += [f"{n:,} NVTX range{'s' * (n != 1)} with NVTX_EVENTS.{column} holding no "
              "number (a BLOB or text): that value left out"
              for column, n in b.wrong.items() if n]
    if odd_tables:
        n = len(odd_tables)
        notes.append(f"{n:,} table{'s' * (n != 1)} whose name is not UTF-8 text left unread "
                     "(no Nsight Systems table's is): "
                     + ", ".join(repr(t[:40]) for t in odd_tables[:3]) + ", ..." * (n > 3))
    return notes
