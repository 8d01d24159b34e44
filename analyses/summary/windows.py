"""Step windows that differ from their step marks, and why (docs/metrics.md, "Windows").

A step's window runs from its mark's start to the next step's start; the last step's to
the later of its mark's end and the end of the last device row it launched. So a window
can end after its mark (``ProfilerStep#1`` ends at 112.2 ms, the kernels it launched run
until 129.5 ms), and the figures over it then hold time the mark does not: this says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.analyses.work import step_marks

if TYPE_CHECKING:  # the Summary type only: figures.py imports the registry
    from traceviz.analyses.summary.figures import Summary

DEVICE_WORK = "device work"      # the last step: the work it launched ran past its mark
NEXT_STEP = "next step"          # a step runs to the next one's start, past its mark's end


@dataclass(frozen=True)
class Stretch:
    """One window that ends after its step's mark."""

    device: int
    step: int
    mark: str                # the mark's name (ProfilerStep#1)
    mark_start_ns: int
    mark_end_ns: int
    end_ns: int              # the window's end
    why: str                 # DEVICE_WORK or NEXT_STEP

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "step": self.step, "mark": self.mark,
                "mark_start_ns": self.mark_start_ns, "mark_end_ns": self.mark_end_ns,
                "end_ns": self.end_ns, "past_mark_ns": self.end_ns - self.mark_end_ns,
                # from the mark's start: the window's length and the mark's
                "length_ns": self.end_ns - self.mark_start_ns,
                "mark_length_ns": self.mark_end_ns - self.mark_start_ns, "why": self.why}


def stretched_windows(i: Inputs, s: Summary) -> list[Stretch]:
    """Every step window that ends after its mark's end, with the reason."""
    marks, per_device = step_marks(i.trace)
    if marks.empty or not i.windows:
        return []
    names = i.trace.events["name"].loc[marks.index].astype(str)  # the marks' rows only
    by_step = pd.DataFrame({"device": marks["device"].to_numpy(np.int64),
                            "step": marks["step"].to_numpy(np.int64),
                            "start": marks["ts_ns"].to_numpy(np.int64),
                            "end": (marks["ts_ns"] + marks["dur_ns"]).to_numpy(np.int64),
                            "name": names.to_numpy(object)})
    keys = ["device", "step"] if per_device else ["step"]
    span = by_step.groupby(keys).agg(start=("start", "min"), end=("end", "max"),
                                     name=("name", "first"))
    out = []
    for device, w in i.windows.items():  # per device, few
        w = w[w["step"] >= 0]
        key = [(device, int(x)) for x in w["step"]] if per_device else list(w["step"])
        m = span.reindex(key)
        last = np.arange(len(w)) == len(w) - 1
        past = w["end_ns"].to_numpy(np.int64) > m["end"].to_numpy(np.int64)
        for j in np.flatnonzero(past):  # the windows that differ, few
            out.append(Stretch(int(device), int(w["step"].iloc[j]), str(m["name"].iloc[j]),
                               int(m["start"].iloc[j]), int(m["end"].iloc[j]),
                               int(w["end_ns"].iloc[j]),
                               DEVICE_WORK if last[j] else NEXT_STEP))
    return out


def _json(s: Summary, top: int) -> dict[str, Any]:
    return {"step_windows": [x.to_dict() for x in s.step_windows]}


SECTION = Section(_json, stretched_windows)
