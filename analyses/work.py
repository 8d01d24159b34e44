"""Which rows do the work, and the windows of time over which they are judged.

GPU trace: kernel, memcpy and memset rows. CPU trace (no device rows): leaf framework
ops play the kernels: the ops that spend most of their time in themselves
(``optree.work_op_mask``), view/metadata/allocation ops (``classify.TRIVIAL_OP``) aside.

Windows (DESIGN.md "Windows"): with steps, one per step, and they never overlap: a step
runs from its start to the start of the next; the last one ends at the later of its
marker's end and the end of the last work its step launched. Without steps, one window
per device from its first launch (or first work) to its last work end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.algos.categorical import groups, per_distinct
from traceviz.algos.intervals import union_length
from traceviz.algos.optree import work_op_mask
from traceviz.table.classify import trivial_op_flags
from traceviz.table.schema import is_in

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace


def missing_activity(trace: Trace) -> str | None:
    """The one line that says a trace's kernel launches have no kernel records (None: it
    has device rows, or launched nothing): the profiler recorded the host side only, so
    the device's time is unknown and no figure is made from the host's in its place."""
    if not trace.kernel_activity_missing:
        return None
    hip = trace.events["name"].cat.categories.astype(str).str.startswith("hip").any() \
        if isinstance(trace.events["name"].dtype, pd.CategoricalDtype) else False
    n = trace.kernel_launch_calls
    return (f"{n:,} kernel launch{'es' if n != 1 else ''}, no kernel records: the trace was "
            f"taken without {'HIP' if hip else 'CUDA'} activity")


def work_rows(trace: Trace) -> pd.DataFrame:
    """Rows that occupy the device: device rows, or leaf ops on a CPU trace."""
    ev = trace.events
    if not trace.is_cpu:
        return trace.device_rows
    ops = ev.take(np.flatnonzero(is_in(ev["kind"], "op")))
    trivial = per_distinct(ops["name"], trivial_op_flags, fill=False)
    ops = ops[~trivial]
    return ops[work_op_mask(ops)]


# what windows and step counts read of a step row (a copy of every column cost more than
# the windows themselves on a small rank)
_MARK_COLUMNS = ["ts_ns", "dur_ns", "step", "device"]


def step_marks(trace: Trace) -> tuple[pd.DataFrame, bool]:
    """The step rows that define windows, and whether they are per device.

    Steps marked on the host apply to every device (Kineto also marks ProfilerStep on
    the GPU timeline: those are ignored then). When steps are marked only per device
    (XSpace's per-GPU ``Steps`` lines), each scopes only its own device.
    """
    ev = trace.events
    rows = np.flatnonzero(is_in(ev["kind"], "step"))
    host = rows[ev["device"].to_numpy()[rows] < 0]
    per_device = not len(host) and len(rows) > 0
    rows = rows if per_device else host
    return pd.DataFrame({c: ev[c].to_numpy()[rows] for c in _MARK_COLUMNS},
                        index=ev.index[rows]), per_device


def step_count(trace: Trace) -> int:
    """Distinct steps (per device where steps are per device: the most of any device)."""
    marks, per_device = step_marks(trace)
    if marks.empty:
        return 0
    if per_device:
        return int(marks.groupby("device")["step"].nunique().max())
    return int(marks["step"].nunique())


def _step_windows(marks: pd.DataFrame, step: np.ndarray, work_end: np.ndarray
                  ) -> pd.DataFrame:
    """Windows from step marks; ``step`` and ``work_end`` are the device's work rows'.
    A step marked more than once runs from its first mark's start to its last mark's end;
    steps in start order (ties: the step marked first)."""
    mark_step = marks["step"].to_numpy(np.int64)
    mark_ts = marks["ts_ns"].to_numpy(np.int64)
    mark_end = mark_ts + marks["dur_ns"].to_numpy(np.int64)
    steps, first, inverse = np.unique(mark_step, return_index=True, return_inverse=True)
    start = np.full(len(steps), np.iinfo(np.int64).max)
    np.minimum.at(start, inverse, mark_ts)
    last_end = np.full(len(steps), np.iinfo(np.int64).min)
    np.maximum.at(last_end, inverse, mark_end)
    by_mark = np.argsort(first, kind="stable")
    order = by_mark[np.argsort(start[by_mark], kind="stable")]
    steps, start, last_end = steps[order], start[order], last_end[order]
    end = np.append(start[1:], 0)
    mine = work_end[step == steps[-1]]
    end[-1] = max(int(last_end[-1]), int(mine.max()) if len(mine) else 0)
    return pd.DataFrame({"step": steps, "start_ns": start, "end_ns": end})


def analysis_windows(trace: Trace, work: pd.DataFrame | None = None
                     ) -> dict[int, pd.DataFrame]:
    """Per device (``-1``: the host of a CPU trace): its windows as a frame of
    ``step`` (-1 without steps), ``start_ns``, ``end_ns``, sorted and disjoint.
    A device with no step of its own, where steps are per device, has none."""
    work = work_rows(trace) if work is None else work
    marks, per_device = step_marks(trace)
    out = {}
    ts = work["ts_ns"].to_numpy(np.int64)
    end = ts + work["dur_ns"].to_numpy(np.int64)
    step = work["step"].to_numpy(np.int64)
    launch_ts = work["launch_ts_ns"].fillna(np.iinfo(np.int64).max).to_numpy(np.int64)
    for device, idx in groups(work["device"].to_numpy(np.int64)):
        mine = marks[marks["device"] == device] if per_device else marks
        if per_device and mine.empty:
            continue
        if len(mine):
            out[device] = _step_windows(mine, step[idx], end[idx])
            continue
        first = min(int(ts[idx].min()), int(launch_ts[idx].min()))
        if trace.is_cpu:
            first = min(first, int(trace.events.loc[trace.events["kind"] == "op",
                                                    "ts_ns"].min()))
        out[device] = pd.DataFrame({"step": [-1], "start_ns": [first],
                                    "end_ns": [int(end[idx].max())]})
    return out


def wall_windows(windows: dict[int, pd.DataFrame]) -> tuple[np.ndarray, np.ndarray]:
    """The union of every device's windows: the wall-clock time under analysis."""
    from traceviz.algos.intervals import union_blocks

    if not windows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    w = pd.concat(windows.values())
    return union_blocks(w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64))


def trace_busy_ns(work: pd.DataFrame) -> int:
    """Union of work intervals over the whole trace, summed over devices."""
    start = work["ts_ns"].to_numpy(np.int64)
    end = start + work["dur_ns"].to_numpy(np.int64)
    return sum(union_length(start[idx], end[idx])
               for _, idx in groups(work["device"].to_numpy(np.int64)))
