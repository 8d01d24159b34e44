"""What a copy's name says: one naming rule for memcpy rows on every format, Kineto's
(``Memcpy HtoD (Pageable -> Device)``: the direction, then the source and destination
memory kinds where the profiler recorded them), and the direction and kinds read back
from such a name. nsys exports and XSpace record the same facts in other fields; their
readers name their rows with ``copy_names`` so that every rule reads one form."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from traceviz.algos.categorical import per_distinct

# Kineto's spelling of CUPTI's copy directions (CUpti_ActivityMemcpyKind)
DIRECTIONS = ("HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP")
# host <-> device: the copies that cross the bus and can run beside compute
HOST_DEVICE = ("HtoD", "DtoH")
# CUPTI's memory kinds as Kineto writes them (CUpti_ActivityMemoryKind)
MEMORY_KINDS = ("Unknown", "Pageable", "Pinned", "Device", "Array", "Managed",
                "Device Static", "Managed Static")

_NAME = re.compile(r"^Memcpy (?P<dir>[A-Za-z]+)(?: \((?P<src>[A-Za-z ]+) -> "
                   r"(?P<dst>[A-Za-z ]+)\))?$")


def copy_name(direction: str, src: str | None = None, dst: str | None = None) -> str:
    """``Memcpy HtoD``, with ``(Pageable -> Device)`` where both kinds are known."""
    base = f"Memcpy {direction}"
    return base if src is None or dst is None else f"{base} ({src} -> {dst})"


def copy_direction(names: pd.Series | pd.Categorical | np.ndarray) -> np.ndarray:
    """Per row, the direction its name says (``HtoD``; "" where it says none: a memset,
    a kernel, ``Memcpy Unknown``), once per distinct name."""
    def one(u: pd.Index) -> np.ndarray:
        found = u.to_series().str.extract(_NAME, expand=True)["dir"]
        return found.where(found.isin(DIRECTIONS), "").fillna("").to_numpy(object)
    return per_distinct(names, one, fill="")

