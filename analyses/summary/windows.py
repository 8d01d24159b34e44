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

from traceviz.algos.unique import unique_first
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
    span = _mark_spans(marks, i.trace.events["name"].loc[marks.index], per_device)
    out = []
    for device, w in i.windows.items():  # per device, few
        w = w[w["step"] >= 0]
        w_step, w_end = w["step"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
        key = [(device, int(x)) for x in w_step] if per_device else list(w["step"])
        m = span.reindex(key)
        m_start, m_end = m["start"].to_numpy(np.int64), m["end"].to_numpy(np.int64)
        m_name = m["name"].to_numpy(object)
        for j in np.flatnonzero(w_end > m_end):  # the windows that differ, few
            out.append(Stretch(int(device), int(w_step[j]), str(m_name[j]), int(m_start[j]),
                               int(m_end[j]), int(w_end[j]),
                               DEVICE_WORK if j == len(w) - 1 else NEXT_STEP))
    return out


def _mark_spans(marks: pd.DataFrame, names: pd.Series, per_device: bool) -> pd.DataFrame:
    """Per step (per device and step with ``per_device``), ascending: its marks' first
    ``start``, last ``end`` and first ``name`` that is not missing (what ``groupby(keys)
    .agg(min, max, first)`` gives), summed in numpy over the marks sorted by key (a
    groupby's aggregation cost most of the section)."""
    keys = [marks["device"].to_numpy(np.int64)] if per_device else []
    keys.append(marks["step"].to_numpy(np.int64))
    start = marks["ts_ns"].to_numpy(np.int64)
    end = (marks["ts_ns"] + marks["dur_ns"]).to_numpy(np.int64)
    text = names.astype(str).to_numpy(object)  # the marks' rows only
    order = np.lexsort(keys[::-1])  # stable: a step's marks stay in row order
    keys = [k[order] for k in keys]
    new = np.r_[True, np.any([k[1:] != k[:-1] for k in keys], axis=0)]
    first = np.flatnonzero(new)
    gid = np.cumsum(new) - 1
    text = text[order]
    valid = np.flatnonzero(pd.notna(text))
    found, at = unique_first(gid[valid])
    name = np.full(len(first), np.nan, dtype=object)
    name[found] = text[valid[at]]
    index = pd.MultiIndex.from_arrays([k[first] for k in keys], names=["device", "step"]) \
        if per_device else pd.Index(keys[0][first], name="step")
    return pd.DataFrame({"start": np.minimum.reduceat(start[order], first),
                         "end": np.maximum.reduceat(end[order], first), "name": name},
                        index=index)


def _json(s: Summary, top: int) -> dict[str, Any]:
    return {"step_windows": [x.to_dict() for x in s.step_windows]}


SECTION = Section(_json, stretched_windows)
