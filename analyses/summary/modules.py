"""Time per ``nn.Module``: the ``module: NAME`` ranges ``--modules`` records (forward
hooks, ``runners/torch/torch_session.py``), like the phases table but one row per module.

A module's figures are inclusive (its children's work is its own too) and cover its
forward calls: autograd runs the backward pass outside them. Device work belongs to the
module whose call launched it; a leaf op on a CPU trace, to the module it starts in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import per_distinct
from traceviz.algos.intervals import union_blocks
from traceviz.analyses.stats import plain_row
from traceviz.analyses.summary.phases import in_blocks, per_step, row_time
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.table.schema import is_in

if TYPE_CHECKING:  # types only
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace

MODULE_PREFIX = "module: "  # runners/torch/torch_session.py writes it
COLUMNS = ("module", "depth", "calls", "wall_ns", "kernels", "kernel_ns", "share")
MODULE_FIGURES = ("calls", "wall_ns", "kernels", "kernel_ns")  # per step in --json


def depth_of(name: str) -> int:
    """0 for the model (its class name alone), else the dotted path's length
    (``lstm (LSTM)``: 1, ``encoder.layers.0 (Linear)``: 3)."""
    if " (" not in name:
        return 0
    return name.rsplit(" (", 1)[0].count(".") + 1


def module_table(trace: Trace, work: pd.DataFrame, wall_start: np.ndarray,
                 wall_end: np.ndarray) -> pd.DataFrame:
    """Per module seen inside the windows, in the order of its first call (a parent
    before its children): ``calls``, ``wall_ns`` (the union of its calls),
    ``kernels``/``kernel_ns`` (work launched inside them: kernels, or leaf ops on a CPU
    trace) and ``share`` of all that work. Empty when no module range was recorded."""
    ev = trace.events
    # the prefix asked of each distinct name, not of every row (analyze runs this always)
    named = per_distinct(ev["name"], lambda u: u.str.startswith(MODULE_PREFIX), fill=False)
    a = ev[is_in(ev["kind"], "annotation") & (ev["device"] < 0).to_numpy()
           & np.asarray(named, dtype=bool)]
    a = a[in_blocks(a["ts_ns"].to_numpy(np.int64), wall_start, wall_end) >= 0]
    if a.empty:
        return pd.DataFrame({c: pd.Series(dtype=str if c == "module" else
                                          float if c == "share" else np.int64)
                             for c in COLUMNS})
    work = work[in_blocks(row_time(work), wall_start, wall_end) >= 0]
    counted = work if trace.is_cpu else work[(work["kind"] == "kernel").to_numpy()]
    t, dur = row_time(counted), counted["dur_ns"].to_numpy(np.int64)
    total = int(dur.sum())
    rows = []
    for name, calls in a.groupby(a["name"].astype(str), sort=False):
        s = calls["ts_ns"].to_numpy(np.int64)
        s, e = union_blocks(s, s + calls["dur_ns"].to_numpy(np.int64))
        inside = in_blocks(t, s, e) >= 0
        module = name[len(MODULE_PREFIX):]
        rows.append({"module": module, "depth": depth_of(module), "calls": len(calls),
                     "wall_ns": int((e - s).sum()), "kernels": int(inside.sum()),
                     "kernel_ns": int(dur[inside].sum()),
                     "share": float(dur[inside].sum() / total) if total else 0.0,
                     "first": int(s[0])})
    table = pd.DataFrame(rows).sort_values(["first", "depth"], kind="stable")
    return table[list(COLUMNS)].reset_index(drop=True)


def _json(s: Summary, top: int) -> dict[str, Any]:
    return {"modules": [plain_row(r) | {"per_step": per_step(r, s.steps, MODULE_FIGURES)}
                        for r in s.modules.to_dict("records")]}


def _compute(i: Inputs, s: Summary) -> pd.DataFrame:
    """Per nn.Module (see ``module_table``); empty: no --modules ranges."""
    return module_table(i.trace, i.work, i.ws, i.we)


SECTION = Section(_json, _compute)
