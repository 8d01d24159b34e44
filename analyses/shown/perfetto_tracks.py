"""What a Perfetto export (``traceviz analyze --perfetto``) draws beside the trace's own
rows: each device row's lane on its stream (a viewer drops events that overlap on one
track), the step windows, the device's idle intervals by cause, its queue depth and the
rows on the critical path. ``render/perfetto.py`` writes them as trace events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.analyses.critical_path.path import CriticalPath
from traceviz.analyses.timeline import idle_intervals, lanes, queue_depth
from traceviz.analyses.work import analysis_windows
from traceviz.table.schema import DEVICE_KINDS

if TYPE_CHECKING:
    from traceviz.trace import Trace


@dataclass
class PerfettoTracks:
    lanes: np.ndarray            # per device row, in the trace's order: its lane (0 first)
    windows: pd.DataFrame        # step, start_ns, end_ns (over every device)
    idle: pd.DataFrame           # device, kind (host_wait, queued), start_ns, end_ns
    queue: pd.DataFrame          # device, ts_ns, depth (launched, not started)
    path: np.ndarray | None      # the critical path's rows (trace index), None: not asked


def perfetto_tracks(trace: Trace, path: CriticalPath | None = None,
                    windows: dict[int, pd.DataFrame] | None = None) -> PerfettoTracks:
    """The tracks of ``trace``; ``path``: its critical path, whose rows are marked;
    ``windows``: its analysis windows where the caller has them (``analyze``'s summary),
    else found once here for the windows' and the idle intervals' tracks."""
    windows = analysis_windows(trace) if windows is None else windows
    ev = trace.events
    dev = ev[ev["kind"].isin(DEVICE_KINDS).to_numpy()]
    start = dev["ts_ns"].to_numpy(np.int64)
    end = start + dev["dur_ns"].to_numpy(np.int64)
    key = dev["device"].to_numpy(np.int64) * (1 << 32) + dev["stream"].to_numpy(np.int64)
    return PerfettoTracks(lanes(key, start, end) if len(dev) else np.zeros(0, np.int64),
                          _windows(windows), idle_intervals(trace, windows),
                          queue_depth(trace),
                          None if path is None else np.asarray(path.rows))


def _windows(windows: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """The step windows, each from its first device's start to its last device's end."""
    if not windows:
        return pd.DataFrame({"step": [], "start_ns": [], "end_ns": []})
    return pd.concat(windows.values()).groupby("step", sort=False).agg(
        start_ns=("start_ns", "min"), end_ns=("end_ns", "max")).reset_index()
