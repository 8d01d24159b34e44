"""A step the profiled code did not finish, left out of the events table.

When a script ends (an exception, ``sys.exit``, Ctrl-C) during its profiled steps, the
capture's session (``runners/torch/torch_session.py``) saves what the profiler recorded and
renames the step it was in ``unfinished step N``. That step's rows are no step's work:
counted, they would add a partial step to every total and per-step figure. So they are
dropped here, on import, once for every analysis: every host row from the unfinished
range's start on (the code ended there: nothing of a complete step comes later), and the
device rows those host rows launched (device rows without a launch: those starting
after it). ``meta["cut_step"]`` and one note say what was dropped.
"""

from __future__ import annotations

import re

import numpy as np

from traceviz.table import schema
from traceviz.table.meta import TraceMeta
from traceviz.trace import Trace
from traceviz.units import fmt_ns, plural

CUT_STEP = re.compile(r"^unfinished step (\d+)$")  # the session's name for the cut step


def cut_step_name(step: int) -> str:
    """The name the capture gives the range of the step the code did not finish."""
    return f"unfinished step {step}"


def without_cut_step(trace: Trace) -> Trace:
    """``trace`` without the rows of an ``unfinished step N`` (the same trace when it has
    none); ``meta["cut_step"]`` holds the step's number, the rows and ops dropped and the
    time from its start to the end of its last row."""
    ev = trace.events
    names = ev["name"].cat.categories if hasattr(ev["name"], "cat") else None
    if names is None or not any(CUT_STEP.match(str(n)) for n in names):
        return trace
    cut_names = [n for n in names if CUT_STEP.match(str(n))]
    is_cut = ev["name"].isin(cut_names).to_numpy()
    start = int(ev["ts_ns"].to_numpy()[is_cut].min())
    step = int(CUT_STEP.match(str(ev["name"].to_numpy()[is_cut][0])).group(1))  # type: ignore[union-attr]
    ts = ev["ts_ns"].to_numpy(np.int64)
    device = schema.is_in(ev["kind"], *schema.DEVICE_KINDS)
    launch = ev["launch_id"].to_numpy(np.int64)
    drop = ~device & (ts >= start)
    dropped_launches = np.unique(launch[drop & (launch >= 0)])
    launched = launch >= 0
    drop |= device & np.where(launched, np.isin(launch, dropped_launches), ts >= start)
    if not drop.any():
        return trace
    end = int((ts + ev["dur_ns"].to_numpy(np.int64))[drop].max())
    ops = int((drop & schema.is_in(ev["kind"], "op")).sum())
    meta = TraceMeta(**trace.meta)
    meta["cut_step"] = {"step": step, "rows": int(drop.sum()), "ops": ops,
                        "span_ns": end - start}
    meta["notes"] = [*meta.get("notes", []),
                     f"step {step}, cut short when the code ended, is left out of every "
                     f"figure: its {plural(ops, 'op')} ({fmt_ns(end - start)}) dropped"]
    kept = ev.take(np.flatnonzero(~drop)).reset_index(drop=True)
    for col in ("name", "op"):  # the dropped names leave the categories too
        if hasattr(kept[col], "cat"):
            kept[col] = kept[col].cat.remove_unused_categories()
    return Trace(events=kept, meta=meta)
