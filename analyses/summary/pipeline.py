"""The input pipeline: per step, how long the host waited for its next batch (the calls
``traceviz/table/input_calls.py`` lists: a DataLoader's ``__next__``, tf.data's
``IteratorGetNext``, the runners' ``data`` phase) and how much of that wait the device
spent idle.

``input_ns`` is the union of those calls inside the analysis windows, per device, summed
over devices like the span; ``idle_ns`` the part of it where the device ran nothing (its
work rows' union subtracted); ``share`` is ``input_ns`` over the span, ``idle_share``
``idle_ns`` over the span. Where the device kept running work queued before the call,
the wait costs nothing yet: only the idle part is time the step lost to its input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.intervals import intersect_blocks, union_blocks
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.table.input_calls import input_frameworks, input_range_mask

if TYPE_CHECKING:  # types only: figures.py imports the registry, which imports this
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace

STEP_COLUMNS = ["step", "window_ns", "input_ns", "idle_ns"]


@dataclass(frozen=True)
class InputPipeline:
    calls: int                 # input calls inside the windows
    input_ns: int              # their union inside the windows, summed over devices
    idle_ns: int               # the part of it with the device idle
    span_ns: int               # the windows' length, summed over devices (as the summary's)
    frameworks: list[str]      # whose calls they are, most time first
    per_step: pd.DataFrame     # STEP_COLUMNS, one row per step window (summed over devices)

    @property
    def share(self) -> float:
        return self.input_ns / self.span_ns if self.span_ns else 0.0

    @property
    def idle_share(self) -> float:
        return self.idle_ns / self.span_ns if self.span_ns else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "input_ns": self.input_ns, "idle_ns": self.idle_ns,
                "share": self.share, "idle_share": self.idle_share,
                "frameworks": self.frameworks,
                "per_step": [{k: int(v) for k, v in r.items()}
                             for r in self.per_step.to_dict("records")]}


def input_blocks(trace: Trace) -> tuple[np.ndarray, np.ndarray, int]:
    """The union of the trace's input calls as sorted blocks, and how many calls."""
    ev = trace.events
    rows = ev[input_range_mask(ev)]
    s = rows["ts_ns"].to_numpy(np.int64)
    bs, be = union_blocks(s, s + rows["dur_ns"].to_numpy(np.int64))
    return bs, be, len(rows)


def input_pipeline(trace: Trace, work: pd.DataFrame, windows: dict[int, pd.DataFrame]
                   ) -> InputPipeline | None:
    """The input pipeline's figures over the analysis windows; None where the trace
    records no input call inside them."""
    bs, be, _ = input_blocks(trace)
    if not len(bs):
        return None
    parts, span = [], 0
    dev = work["device"].to_numpy(np.int64)
    ts = work["ts_ns"].to_numpy(np.int64)
    end = ts + work["dur_ns"].to_numpy(np.int64)
    ev = trace.events
    mask = input_range_mask(ev)
    starts = ev["ts_ns"].to_numpy(np.int64)[mask]
    for device, w in windows.items():
        ws, we = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
        span += int((we - ws).sum())
        ins, ine = intersect_blocks(bs, be, ws, we)
        mine = dev == device
        busy_s, busy_e = union_blocks(ts[mine], end[mine])
        os_, oe = intersect_blocks(ins, ine, busy_s, busy_e)
        # per window: the input inside it and the busy part of that
        k_in = np.searchsorted(ws, ins, side="right") - 1
        k_ov = np.searchsorted(ws, os_, side="right") - 1
        inp = np.bincount(k_in, weights=ine - ins, minlength=len(ws))
        ov = np.bincount(k_ov, weights=oe - os_, minlength=len(ws))
        parts.append(pd.DataFrame({"step": w["step"].to_numpy(np.int64), "window_ns": we - ws,
                                   "input_ns": inp.astype(np.int64),
                                   "idle_ns": (inp - ov).astype(np.int64)}))
    wall_s, wall_e = union_blocks(
        np.concatenate([w["start_ns"].to_numpy(np.int64) for w in windows.values()]),
        np.concatenate([w["end_ns"].to_numpy(np.int64) for w in windows.values()])) \
        if windows else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    k = np.searchsorted(wall_s, starts, side="right") - 1
    calls = int(((k >= 0) & (starts < wall_e[np.maximum(k, 0)] if len(wall_s) else False)).sum())
    per_step = pd.concat(parts).groupby("step", as_index=False, sort=True)[
        STEP_COLUMNS[1:]].sum() if parts else pd.DataFrame(columns=STEP_COLUMNS)
    total = int(per_step["input_ns"].sum())
    if not total:
        return None
    return InputPipeline(calls, total, int(per_step["idle_ns"].sum()), span,
                         input_frameworks(ev), per_step[STEP_COLUMNS].astype(np.int64))


def _compute(i: Inputs, s: Summary) -> InputPipeline | None:
    return input_pipeline(i.trace, i.work, i.windows)


def _json(s: Summary, top: int) -> dict[str, Any]:
    p = s.input_pipeline
    return {"input_pipeline": None if p is None else p.to_dict()}


SECTION = Section(_json, _compute)
