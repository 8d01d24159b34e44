"""Time per training phase: the ``data`` / ``forward`` / ``backward`` / ``optimizer``
ranges the runners mark (record_function, NVTX, TF/JAX trace annotations).

Like HTA's GPU time per user annotation and ``nsys stats``' NVTX summary, device work
belongs to the phase its launch call was made in (a kernel launched in ``forward`` that
runs after the range closed is still forward's); a leaf op on a CPU trace, to the phase
it starts in. Ranges count where they start inside the analysis windows; work outside
every phase is the ``(no phase)`` row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.intervals import union_blocks, union_length
from traceviz.analyses.stats import plain_row
from traceviz.analyses.summary.protocol import Inputs, Section

if TYPE_CHECKING:  # types only: trace.py's notebook API imports analyses
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace

PHASES = ("data", "forward", "backward", "optimizer")
NO_PHASE = "(no phase)"
COLUMNS = ("phase", "ranges", "wall_ns", "busy_ns", "kernels", "kernel_ns", "casts", "cast_ns")


def phase_ranges(trace: Trace, wall_start: np.ndarray, wall_end: np.ndarray) -> pd.DataFrame:
    """Host ranges named after a phase that start inside the windows: ``phase``,
    ``start_ns``, ``end_ns`` (one phase's overlapping ranges merged: NVTX and
    record_function mark the same span twice)."""
    ev = trace.events
    a = ev[(ev["kind"] == "annotation") & (ev["device"] < 0) & ev["name"].isin(PHASES)]
    a = a[in_blocks(a["ts_ns"].to_numpy(np.int64), wall_start, wall_end) >= 0]
    parts = []
    for name, rows in a.groupby(a["name"].astype(str), sort=False):
        s = rows["ts_ns"].to_numpy(np.int64)
        s, e = union_blocks(s, s + rows["dur_ns"].to_numpy(np.int64))
        parts.append(pd.DataFrame({"phase": name, "start_ns": s, "end_ns": e}))
    if not parts:
        return pd.DataFrame({"phase": pd.Series(dtype=str), "start_ns": pd.Series(dtype=np.int64),
                             "end_ns": pd.Series(dtype=np.int64)})
    return pd.concat(parts).sort_values("start_ns", kind="stable").reset_index(drop=True)


def in_blocks(t: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Index of the block (sorted, disjoint) holding each time, or -1."""
    i = np.searchsorted(start, t, side="right") - 1
    ok = i >= 0
    ok[ok] = t[ok] < end[i[ok]]
    return np.where(ok, i, -1)


def row_time(work: pd.DataFrame) -> np.ndarray:
    """When a work row was asked for: its launch call's start, else its own start."""
    launch = work["launch_ts_ns"]
    return np.where(launch.isna().to_numpy(), work["ts_ns"].to_numpy(np.int64),
                    launch.fillna(0).to_numpy(np.int64))


def assign_phases(work: pd.DataFrame, ranges: pd.DataFrame) -> np.ndarray:
    """The phase of each work row (``NO_PHASE`` outside every range), by ``row_time``."""
    t = row_time(work)
    out = np.full(len(work), NO_PHASE, dtype=object)
    if ranges.empty or not len(work):
        return out
    i = in_blocks(t, ranges["start_ns"].to_numpy(np.int64), ranges["end_ns"].to_numpy(np.int64))
    out[i >= 0] = ranges["phase"].to_numpy()[i[i >= 0]]
    return out


def phase_table(trace: Trace, work: pd.DataFrame, wall_start: np.ndarray,
                wall_end: np.ndarray) -> pd.DataFrame:
    """Per phase: ``ranges`` (its marked spans, duplicates merged), ``wall_ns`` (their
    union, stretched per device over the time its work ran there, summed over devices),
    ``busy_ns`` (union of its work per device, summed), ``kernels``/``kernel_ns``
    (kernels, or leaf ops on a CPU trace), ``casts``/``cast_ns``. Empty when the trace
    marks no phase."""
    ranges = phase_ranges(trace, wall_start, wall_end)
    if ranges.empty:
        return pd.DataFrame({c: pd.Series(dtype=str if c == "phase" else np.int64)
                             for c in COLUMNS})
    work = work[in_blocks(row_time(work), wall_start, wall_end) >= 0]
    phase = assign_phases(work, ranges)
    counted = work if trace.is_cpu else work[(work["kind"] == "kernel").to_numpy()]
    counted_phase = phase if trace.is_cpu else phase[(work["kind"] == "kernel").to_numpy()]
    rows = []
    present = [p for p in PHASES if (ranges["phase"] == p).any()]
    if (phase == NO_PHASE).any():
        present.append(NO_PHASE)
    for p in present:
        mine = ranges[ranges["phase"] == p]
        w = work[phase == p]
        k = counted[counted_phase == p]
        busy = 0
        r_start, r_end = mine["start_ns"].to_numpy(np.int64), mine["end_ns"].to_numpy(np.int64)
        wall = int((r_end - r_start).sum())
        reach = 0  # per device: its ranges and the time its work ran there, united
        for _, rows_d in w.groupby("device", observed=True):
            s = rows_d["ts_ns"].to_numpy(np.int64)
            e = s + rows_d["dur_ns"].to_numpy(np.int64)
            busy += union_length(s, e)
            reach += union_length(np.r_[r_start, s], np.r_[r_end, e])
        casts = w[w["is_cast"].to_numpy()]
        rows.append({
            "phase": p, "ranges": len(mine),
            # work launched in the phase that ran after its ranges closed (a device behind
            # its host, a graph launched at the end) stretches it: busy <= wall per device
            "wall_ns": max(wall, reach),
            "busy_ns": busy, "kernels": len(k), "kernel_ns": int(k["dur_ns"].sum()),
            "casts": len(casts), "cast_ns": int(casts["dur_ns"].sum()),
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def per_step(row: dict, steps: int, keys: tuple[str, ...]) -> dict[str, float | None]:
    """``keys`` of a row per step (the whole trace's where it has no steps)."""
    per = max(steps, 1)
    return {k: row[k] / per for k in keys}


def _per_step_phase(row: dict, steps: int) -> dict[str, float | None]:
    """A phase's figures per step, as ``analyze`` prints them (the whole trace where it has
    no steps), and its busy share of wall time."""
    out = per_step(row, steps, ("wall_ns", "busy_ns", "kernels", "kernel_ns", "casts",
                                "cast_ns"))
    out["busy_fraction"] = row["busy_ns"] / row["wall_ns"] if row["wall_ns"] else None
    return out


def _json(s: Summary, top: int) -> dict[str, Any]:
    return {"phases": [plain_row(r) | {"per_step": _per_step_phase(r, s.steps)}
                       for r in s.phases.to_dict("records")]}


def _compute(i: Inputs, s: Summary) -> pd.DataFrame:
    """Per phase (see ``phase_table``); empty: none marked."""
    return phase_table(i.trace, i.work, i.ws, i.we)


SECTION = Section(_json, _compute)
