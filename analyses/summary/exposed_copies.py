"""Copies the device runs with no kernel beside it: the host <-> device copies
(``Memcpy HtoD``/``DtoH``, ``table/copy_names.py``) inside the analysis windows, and the part
of each that no kernel of its device overlaps. Such a copy is on the step's path: nothing
computes while it runs, so the step is that much longer than its compute. The advice rule
``serialized_copies`` (``advice/copies.py``) and the what-if scenario ``overlap_copies``
(``whatif/overlap_copies.py``) read it.

A copy that kernels overlap is already hidden (a prefetching loader, a side stream); a
device-to-device copy is the device's own work, not a transfer that could run beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.algos.categorical import groups
from traceviz.algos.intervals import covered_until, intersect_blocks, union_blocks
from traceviz.table.copy_names import HOST_DEVICE, copy_direction
from traceviz.table.schema import is_in

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

_COLUMNS = ("row", "device", "step", "direction", "name", "bytes", "dur_ns", "exposed_ns",
            "compute_ns")


@dataclass(frozen=True)
class ExposedCopies:
    """Host <-> device copies inside the windows that no kernel fully overlaps."""

    # per copy: ``row`` (its index in the events), device, step, direction (HtoD, DtoH),
    # name, bytes (-1: not recorded), dur_ns, exposed_ns (its time in the windows no kernel
    # of its device overlaps), compute_ns (the kernels' union in its window: the compute a
    # copy of the next step could run beside)
    rows: pd.DataFrame
    exposed_ns: int   # per device the union of the copies' exposed time, summed

    @property
    def empty(self) -> bool:
        return self.rows.empty


def exposed_copies(trace: Trace, work: pd.DataFrame, windows: dict[int, pd.DataFrame]
                   ) -> ExposedCopies:
    """The host <-> device copies with time no kernel overlaps, inside ``windows``
    (``analyses/work.py``), per device."""
    empty = ExposedCopies(pd.DataFrame({c: pd.Series(dtype=object if c in (
        "direction", "name") else np.int64) for c in _COLUMNS}), 0)
    if trace.is_cpu or work.empty:
        return empty
    direction = np.where(is_in(work["kind"], "memcpy"), copy_direction(work["name"]), "")
    copy = np.isin(direction, HOST_DEVICE)
    if not copy.any():
        return empty
    kernel = is_in(work["kind"], "kernel")
    ts = work["ts_ns"].to_numpy(np.int64)
    end = ts + work["dur_ns"].to_numpy(np.int64)
    parts, total = [], 0
    for device, idx in groups(work["device"].to_numpy(np.int64)):
        w = windows.get(device)
        c = idx[copy[idx]]
        if w is None or not len(c):
            continue
        ws, we = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
        ks, ke = intersect_blocks(ws, we, *union_blocks(ts[idx][kernel[idx]],
                                                       end[idx][kernel[idx]]))
        s, e = ts[c], end[c]
        in_w = covered_until(ws, we, e) - covered_until(ws, we, s)
        exposed = in_w - (covered_until(ks, ke, e) - covered_until(ks, ke, s))
        # the kernels' time in the copy's window (the one holding its start)
        k = np.clip(np.searchsorted(ws, s, side="right") - 1, 0, len(ws) - 1)
        compute = covered_until(ks, ke, we[k]) - covered_until(ks, ke, ws[k])
        # copies can run at once (two directions, two streams): the step loses their union
        cs, ce = intersect_blocks(ws, we, *union_blocks(s, e))
        total += int((ce - cs).sum()) - _covered(cs, ce, ks, ke)
        parts.append(pd.DataFrame({
            "row": work.index.to_numpy()[c], "device": device,
            "step": work["step"].to_numpy(np.int64)[c], "direction": direction[c],
            "name": work["name"].iloc[c].astype(str).to_numpy(),
            "bytes": work["bytes"].to_numpy(np.int64)[c], "dur_ns": e - s,
            "exposed_ns": exposed, "compute_ns": compute}))
    if not parts:
        return empty
    rows = pd.concat(parts, ignore_index=True)
    return ExposedCopies(rows[rows["exposed_ns"] > 0].reset_index(drop=True), total)


def _covered(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray,
             b_end: np.ndarray) -> int:
    s, e = intersect_blocks(a_start, a_end, b_start, b_end)
    return int((e - s).sum())
