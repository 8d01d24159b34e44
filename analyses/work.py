"""Which rows do the work, and how busy the device was over the span it was needed.

GPU trace: kernel, memcpy and memset rows. CPU trace (no device rows): leaf framework
ops play the kernels: the ops that spend most of their time in themselves
(``optree.work_op_mask``), view/metadata/allocation ops (``classify.TRIVIAL_OP``) aside.
Busy = union of work intervals; span = first launch (or step start) to last device end,
per step when the trace has steps (DESIGN.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceviz.classify import trivial_op_flags
from traceviz.intervals import union_length
from traceviz.optree import work_op_mask
from traceviz.schema import DEVICE_KINDS
from traceviz.trace import Trace


def work_rows(trace: Trace) -> pd.DataFrame:
    """Rows that occupy the device: device rows, or leaf ops on a CPU trace."""
    ev = trace.events
    if not trace.is_cpu:
        return ev[ev["kind"].isin(DEVICE_KINDS)]
    ops = ev[ev["kind"] == "op"]
    names = ops["name"].astype("category")
    trivial = np.append(trivial_op_flags(names.cat.categories), False)[names.cat.codes]
    ops = ops[~trivial]
    return ops[work_op_mask(ops)]


def step_windows(trace: Trace, device: int | None = None) -> pd.DataFrame:
    """One row per step number: ``step``, ``start_ns``, ``end_ns``; with ``device``, only
    that device's own step rows (XSpace's per-GPU ``Steps`` lines)."""
    steps = trace.events[trace.events["kind"] == "step"]
    if device is not None:
        steps = steps[steps["device"] == device]
    if steps.empty:
        return pd.DataFrame({"step": [], "start_ns": [], "end_ns": []}, dtype=np.int64)
    s = steps.assign(end_ns=steps["ts_ns"] + steps["dur_ns"])
    g = s.groupby("step", sort=True)
    return pd.DataFrame({
        "step": g.size().index.to_numpy(np.int64),
        "start_ns": g["ts_ns"].min().to_numpy(np.int64),
        "end_ns": g["end_ns"].max().to_numpy(np.int64),
    })


@dataclass(frozen=True)
class DeviceBusy:
    """Busy time and span of one device (``-1`` = the host, on a CPU trace)."""

    device: int
    busy_ns: int
    span_ns: int
    work_count: int
    per_step: pd.DataFrame  # step, start_ns, end_ns, busy_ns, span_ns (empty without steps)

    @property
    def idle_fraction(self) -> float | None:
        return 1.0 - self.busy_ns / self.span_ns if self.span_ns else None


def device_busy(trace: Trace, work: pd.DataFrame | None = None) -> list[DeviceBusy]:
    """Busy/span per device, step-scoped when the trace has steps.

    Steps marked on the host apply to every device. When steps are marked only per
    device (every step row has a device, as XSpace's per-GPU ``Steps`` lines), each
    scopes only its own device, and a device with none is left out of the step figures.
    """
    work = work_rows(trace) if work is None else work
    windows = step_windows(trace)
    ev = trace.events
    step_device = ev.loc[ev["kind"] == "step", "device"]
    device_scoped = bool(len(step_device)) and bool((step_device >= 0).all())
    out = []
    for device, rows in work.groupby("device", sort=True, observed=True):
        start = rows["ts_ns"].to_numpy(np.int64)
        end = start + rows["dur_ns"].to_numpy(np.int64)
        if device_scoped:
            windows = step_windows(trace, int(device))
            if windows.empty:
                continue
        if windows.empty:
            first = start.min()
            launches = rows["launch_ts_ns"].dropna()
            if len(launches):
                first = min(first, int(launches.min()))
            if trace.is_cpu:
                ops = trace.events[trace.events["kind"] == "op"]
                first = min(first, int(ops["ts_ns"].min()))
            out.append(DeviceBusy(int(device), union_length(start, end), int(end.max() - first),
                                  len(rows), pd.DataFrame()))
            continue
        step = rows["step"].to_numpy()
        per = []
        for w in windows.itertuples(index=False):
            sel = step == w.step
            busy = union_length(start[sel], end[sel])
            last = max(int(w.end_ns), int(end[sel].max()) if sel.any() else 0)
            per.append((w.step, w.start_ns, last, busy, last - w.start_ns))
        per_step = pd.DataFrame(per, columns=["step", "start_ns", "end_ns", "busy_ns", "span_ns"])
        out.append(DeviceBusy(int(device), int(per_step["busy_ns"].sum()),
                              int(per_step["span_ns"].sum()), len(rows), per_step))
    return out


def trace_busy_ns(work: pd.DataFrame) -> int:
    """Union of work intervals over the whole trace, summed over devices."""
    total = 0
    for _, rows in work.groupby("device", observed=True):
        start = rows["ts_ns"].to_numpy(np.int64)
        total += union_length(start, start + rows["dur_ns"].to_numpy(np.int64))
    return total
