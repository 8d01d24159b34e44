"""Do a device's streams overlap? Per device: how many streams ran work, the time with two
or more of them busy at once, and that time's share of busy time.

Work on several streams is meant to overlap (an input projection beside the recurrent
step, one layer beside the next); whether it does shows only in time: a stream is busy
while the union of its rows runs, and the device runs streams *together* only while two
or more are busy. A run that spreads kernels over five streams but never has two busy at
once paid for the streams' bookkeeping (events, waits) and got nothing for it. Only
streams that ran kernels are judged so: a stream that holds copies alone (TensorFlow's
host-to-device and device-to-host streams, one input batch a step) is a copy engine's
queue, not compute that failed to overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import groups
from traceviz.algos.intervals import clipped_lengths, union_blocks, union_in_windows
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.table.schema import is_in

if TYPE_CHECKING:  # the Summary type only: figures.py imports the registry
    from traceviz.analyses.summary.figures import Summary

# below this share of busy time, streams are said not to overlap (a few rows that touch
# at their edges are not concurrency)
OVERLAP_NONE = 0.01


@dataclass(frozen=True)
class StreamOverlap:
    """One device's streams over the analysis windows."""

    device: int
    streams: int             # streams that ran work inside the windows
    busy_ns: int             # union of all its work inside the windows
    multi_ns: int            # time with >= 2 streams busy at once
    max_streams: int         # the most streams busy at one moment
    per_step: pd.DataFrame   # step, busy_ns, multi_ns
    # of the streams, those that ran kernels (not copies alone), and the time with two
    # or more of them busy at once
    kernel_stream_ids: tuple[int, ...] = ()
    kernel_multi_ns: int = 0

    @property
    def kernel_streams(self) -> int:
        return len(self.kernel_stream_ids)

    @property
    def overlap_fraction(self) -> float | None:
        """Time with >= 2 streams busy / busy time."""
        return self.multi_ns / self.busy_ns if self.busy_ns else None

    @property
    def kernel_overlap_fraction(self) -> float | None:
        """Time with >= 2 kernel streams busy / busy time."""
        return self.kernel_multi_ns / self.busy_ns if self.busy_ns else None

    @property
    def never_overlaps(self) -> bool:
        """Several streams ran kernels, and (almost) never two of them at once."""
        f = self.kernel_overlap_fraction
        return self.kernel_streams >= 2 and f is not None and f < OVERLAP_NONE

    def to_dict(self) -> dict:
        return {"device": self.device, "streams": self.streams, "busy_ns": self.busy_ns,
                "multi_stream_ns": self.multi_ns, "overlap_fraction": self.overlap_fraction,
                "max_streams_busy": self.max_streams, "kernel_streams": self.kernel_streams,
                "kernel_multi_stream_ns": self.kernel_multi_ns,
                "kernel_overlap_fraction": self.kernel_overlap_fraction,
                "never_overlaps": self.never_overlaps}


def _depth_segments(starts: np.ndarray, ends: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[t_i, t_i+1) and how many of the intervals are open there (closings first at
    equal times, so touching intervals are not counted as overlapping)."""
    times = np.concatenate([ends, starts])
    delta = np.concatenate([-np.ones(len(ends), np.int64), np.ones(len(starts), np.int64)])
    order = np.argsort(times, kind="stable")
    times, depth = times[order], np.cumsum(delta[order])
    return times[:-1], times[1:], depth[:-1]


def stream_overlap(work: pd.DataFrame, windows: dict[int, pd.DataFrame]
                   ) -> list[StreamOverlap]:
    """Per device with windows: its streams' overlap (device rows only: a CPU trace's
    work has no streams)."""
    out = []
    device = work["device"].to_numpy(np.int64)
    start = work["ts_ns"].to_numpy(np.int64)
    end = start + work["dur_ns"].to_numpy(np.int64)
    stream = work["stream"].to_numpy(np.int64)
    kernel = is_in(work["kind"], "kernel")
    for dev, idx in groups(device):
        win = windows.get(dev)
        if win is None or dev < 0:
            continue
        ws, we = win["start_ns"].to_numpy(np.int64), win["end_ns"].to_numpy(np.int64)
        bs, be, kbs, kbe, used, used_k = [], [], [], [], 0, []
        for sid, sidx in groups(stream[idx]):
            s, e = union_blocks(start[idx][sidx], end[idx][sidx])
            if union_in_windows(s, e, ws, we).sum() > 0:
                used += 1
                k = sidx[kernel[idx][sidx]]
                ks, ke = union_blocks(start[idx][k], end[idx][k])
                if union_in_windows(ks, ke, ws, we).sum() > 0:  # ran kernels, not copies alone
                    used_k.append(int(sid))
                    kbs.append(s)
                    kbe.append(e)
            bs.append(s)
            be.append(e)
        busy = union_in_windows(start[idx], end[idx], ws, we)
        multi, most = _multi(bs, be, ws, we)
        kernel_multi, _ = _multi(kbs, kbe, ws, we)
        out.append(StreamOverlap(
            device=int(dev), streams=used, busy_ns=int(busy.sum()), multi_ns=int(multi.sum()),
            max_streams=most,
            per_step=pd.DataFrame({"step": win["step"].to_numpy(np.int64), "busy_ns": busy,
                                   "multi_ns": multi}),
            kernel_stream_ids=tuple(used_k), kernel_multi_ns=int(kernel_multi.sum())))
    return out


def _multi(bs: list[np.ndarray], be: list[np.ndarray], ws: np.ndarray, we: np.ndarray
           ) -> tuple[np.ndarray, int]:
    """Per window, the time with two or more of the streams' unions (``bs``/``be``, one
    pair per stream) open at once; and the most open at one moment inside the windows."""
    if not bs or not sum(len(x) for x in bs):
        return np.zeros(len(ws), np.int64), 0
    a, b, depth = _depth_segments(np.concatenate(bs), np.concatenate(be))
    multi_seg = depth >= 2
    multi = union_in_windows(a[multi_seg], b[multi_seg], ws, we)
    inside = clipped_lengths(a, b, ws, we) > 0
    return multi, int(depth[inside].max()) if inside.any() else 0


def _json(s: Summary, top: int) -> dict[str, Any]:
    """``stream_overlap`` of ``--json``: per device, with the per-step figures and the
    per-stream rows the Streams table prints."""
    per = max(s.steps, 1)
    out = []
    for o in s.stream_overlap:
        d = next(d for d in s.devices if d.device == o.device)
        out.append(o.to_dict() | {
            "per_step": {"multi_stream_ns": o.multi_ns / per, "busy_ns": o.busy_ns / per},
            "streams_per_step": [
                {"stream": int(r.stream), "work_count": r.work_count / per,
                 "busy_ns": r.busy_ns / per,
                 "share_of_device_busy": r.busy_ns / d.busy_ns if d.busy_ns else None}
                for r in d.streams.itertuples(index=False)]})
    return {"stream_overlap": out}


def _compute(i: Inputs, s: Summary) -> list[StreamOverlap]:
    return [] if s.cpu_trace else stream_overlap(i.work, i.windows)


SECTION = Section(_json, _compute)
