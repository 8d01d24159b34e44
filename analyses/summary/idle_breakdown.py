"""Busy time, and idle time split the way its cause splits, per device, stream and step.

Within the analysis windows (``work.analysis_windows``) every moment of a device is one
of three things:

- **busy**: some work row runs (union of kernel/memcpy/memset intervals);
- **host wait**: nothing runs and nothing launched is waiting to run: the device waits
  for the host to launch work. This alone is "launch-bound";
- **queued idle**: nothing runs although launched work is pending (dependencies on other
  streams or events, synchronisation, a device running behind its host).

Work is *pending* from the end of its launch call (the host is still launching until the
call returns) to its start; a row whose launch is not in the trace (launched before the
window) is pending from the trace start if it ran before the first launched row of its
stream (it was queued when recording began), else for no known time. On a device with no
launch recorded at all, the split is unknown (``None``). The **queue depth** is the
number of pending rows at a moment: its time-weighted mean and its maximum over the
windows. HTA's idle breakdown differs: it calls a gap "host wait" when the next kernel's
launch call *starts* after the previous kernel ends, per stream, and counts gaps between
consecutive kernels only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import groups
from traceviz.algos.intervals import (
    clipped_lengths,
    max_overlap_in_windows,
    union_in_windows,
)

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

STEP_COLUMNS = ["step", "start_ns", "end_ns", "span_ns", "busy_ns", "host_wait_ns",
                "queued_idle_ns"]
STREAM_COLUMNS = ["device", "stream", "work_count", "busy_ns", "host_wait_ns",
                  "queued_idle_ns", "queue_mean", "queue_max"]

_NO_STREAMS = pd.DataFrame([], columns=STREAM_COLUMNS)  # copied: a new one costs 15x more


@dataclass(frozen=True)
class Idle:
    """Busy and idle time of one device (``-1`` = the host, on a CPU trace)."""

    device: int
    span_ns: int
    busy_ns: int
    host_wait_ns: int | None       # None: no launch call recorded for this device
    queued_idle_ns: int | None
    queue_mean: float | None       # launched-not-started rows, time-weighted mean
    queue_max: int | None
    work_count: int
    per_step: pd.DataFrame         # STEP_COLUMNS, one row per window
    streams: pd.DataFrame          # STREAM_COLUMNS

    @property
    def idle_ns(self) -> int:
        return self.span_ns - self.busy_ns

    @property
    def idle_fraction(self) -> float | None:
        return self.idle_ns / self.span_ns if self.span_ns else None

    @property
    def launch_bound_fraction(self) -> float | None:
        if self.host_wait_ns is None or not self.span_ns:
            return None
        return self.host_wait_ns / self.span_ns


@dataclass(frozen=True)
class _Rows:
    """The columns of work rows the split reads, as arrays (``take`` picks a subset)."""

    start: np.ndarray
    end: np.ndarray
    stream: np.ndarray
    launched: np.ndarray     # the launch call is in the trace
    call_end: np.ndarray     # its end (0 where not launched)

    @classmethod
    def of(cls, work: pd.DataFrame) -> _Rows:
        start = work["ts_ns"].to_numpy(np.int64)
        launch_ts = work["launch_ts_ns"]
        launched = launch_ts.notna().to_numpy()
        call_end = (launch_ts.fillna(0).to_numpy(np.int64)
                    + work["launch_dur_ns"].fillna(0).to_numpy(np.int64))
        return cls(start, start + work["dur_ns"].to_numpy(np.int64),
                   work["stream"].to_numpy(np.int64), launched, call_end)

    def take(self, idx: np.ndarray) -> _Rows:
        return _Rows(self.start[idx], self.end[idx], self.stream[idx], self.launched[idx],
                     self.call_end[idx])


def _pending(rows: _Rows, trace_start: int) -> tuple[np.ndarray, np.ndarray]:
    """[launch end, start) of each row. A row without its launch that runs before the
    first launched row of its stream was launched before recording began: it pends from
    the trace start; later rows without a launch have no known pending time."""
    start, launched = rows.start, rows.launched
    call_end = np.where(launched, rows.call_end, trace_start)
    stream_of, streams = pd.factorize(rows.stream)  # hashed: a few streams, many rows
    first = np.full(len(streams), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, stream_of[launched], start[launched])
    early = ~launched & (start < first[stream_of])
    begin = np.where(launched, np.minimum(call_end, start), np.where(early, trace_start, start))
    return begin, start


def _split(rows: _Rows, ws: np.ndarray, we: np.ndarray, know_launches: bool,
           trace_start: int) -> dict:
    """Per window [ws, we): busy/host-wait/queued for ``rows``, and the queue depth."""
    start, end = rows.start, rows.end
    busy = union_in_windows(start, end, ws, we)
    out: dict[str, Any] = {"busy": busy, "host_wait": None, "queued": None, "queue_mean": None,
           "queue_max": None}
    if not know_launches:
        return out
    p_start, p_end = _pending(rows, trace_start)
    occupied = union_in_windows(np.concatenate([start, p_start]),
                                np.concatenate([end, p_end]), ws, we)
    span = int((we - ws).sum())
    out["host_wait"] = (we - ws) - occupied
    out["queued"] = occupied - busy
    out["queue_mean"] = float(clipped_lengths(p_start, p_end, ws, we).sum()) / span \
        if span else None
    out["queue_max"] = max_overlap_in_windows(p_start, p_end, ws, we)
    return out


def idle_breakdown(trace: Trace, work: pd.DataFrame, windows: dict[int, pd.DataFrame],
                   streams: bool = True) -> list[Idle]:
    """One ``Idle`` per device that has windows (``streams=False``: without the
    per-stream table, which the rank figures do not need)."""
    out = []
    every = _Rows.of(work)
    for device, idx in groups(work["device"].to_numpy(np.int64)):
        win = windows.get(device)
        if win is None:
            continue
        rows = every.take(idx)
        know = not trace.is_cpu and bool(rows.launched.any())
        ws, we = win["start_ns"].to_numpy(np.int64), win["end_ns"].to_numpy(np.int64)
        parts = _split(rows, ws, we, know, 0)
        span = we - ws
        per_step = pd.DataFrame({
            "step": win["step"].to_numpy(np.int64), "start_ns": ws, "end_ns": we,
            "span_ns": span, "busy_ns": parts["busy"],
            "host_wait_ns": parts["host_wait"] if know else pd.NA,
            "queued_idle_ns": parts["queued"] if know else pd.NA,
        })  # in STEP_COLUMNS order (columns= would cost more than the frame)
        per_stream = []
        for stream, sidx in (groups(rows.stream) if streams else ()):
            sp = _split(rows.take(sidx), ws, we, know, 0)
            per_stream.append((device, stream, len(sidx), int(sp["busy"].sum()),
                               _total(sp["host_wait"]), _total(sp["queued"]),
                               sp["queue_mean"], sp["queue_max"]))
        out.append(Idle(
            device=device, span_ns=int(span.sum()), busy_ns=int(parts["busy"].sum()),
            host_wait_ns=_total(parts["host_wait"]), queued_idle_ns=_total(parts["queued"]),
            queue_mean=parts["queue_mean"], queue_max=parts["queue_max"],
            work_count=len(idx), per_step=per_step,
            streams=pd.DataFrame(per_stream, columns=STREAM_COLUMNS) if per_stream
            else _NO_STREAMS.copy(),
        ))
    return out


def _total(values: np.ndarray | None) -> int | None:
    return None if values is None else int(np.sum(values))


def host_wait_total(devices: list[Idle]) -> int | None:
    """Host wait summed over the devices whose launches are in the trace (None: none)."""
    known = [d.host_wait_ns for d in devices if d.host_wait_ns is not None]
    return sum(known) if known else None


def launch_bound(devices: list[Idle]) -> float | None:
    """Host wait / span over the devices whose launches are in the trace."""
    wait = host_wait_total(devices)
    known = sum(d.span_ns for d in devices if d.host_wait_ns is not None)
    return wait / known if wait is not None and known else None
