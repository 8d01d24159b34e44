"""Host time by its cause, per launching thread: runtime/driver API calls, framework ops'
own time, and the time between ops.

Inside the analysis windows every moment of a host thread is one of:

- **API calls**: a CUDA/HIP runtime or driver call runs (the union of the thread's
  runtime rows: launches, event records, stream waits, queries); of it, the time in
  synchronizing calls (``sync_ns``) is the host waiting for the device, not host work;
- **framework ops**: a framework op runs and no API call inside it (the op's own time:
  the dispatcher, shape checks, allocation);
- **OS** (``os_ns``): none of those, but an OS call or a stretch off the CPU that the
  profiler recorded (nsys: sleep, I/O, locks, scheduled out);
- **between ops**: none of these: Python, the interpreter, the data loader, anything
  the profiler did not record; on a TensorFlow or JAX runtime thread (not the
  interpreter's) the framework's executor (``HostSplit.between_what``,
  ``table/frameworks.py``).

A profiler that charges the time before a call to the call (a critical path edge, a
"top host call") makes Python look like an API: splitting by what ran keeps them apart.
**Host time per device op** is the step time over the device ops (kernels, copies) the
step ran: what one device op costs the host end to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import categorical_of, per_distinct
from traceviz.algos.intervals import clipped_lengths, union_blocks_by_group, union_in_windows
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.table.frameworks import between_ops_what
from traceviz.table.launch_apis import is_sync_call
from traceviz.table.schema import is_in

if TYPE_CHECKING:  # types only: trace.py's notebook API imports analyses
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace

THREAD_COLUMNS = ["pid", "tid", "launches", "window_ns", "api_ns", "op_ns", "os_ns",
                  "between_ns", "sync_ns"]
API_COLUMNS = ["name", "calls", "total_ns"]


@dataclass(frozen=True)
class HostSplit:
    """The host threads that launched device work, split by cause over the windows."""

    threads: pd.DataFrame    # THREAD_COLUMNS, the busiest launcher first
    apis: pd.DataFrame       # API_COLUMNS on the busiest launcher, largest total first
    steps: int
    # what runs between ops on the busiest launcher: "Python", or the framework's executor
    between_what: str = "Python"

    @property
    def main(self) -> dict | None:
        """The thread that made the most launch calls (None: no launcher)."""
        return None if self.threads.empty else self.threads.iloc[0].to_dict()

    def to_dict(self) -> dict:
        per = max(self.steps, 1)
        main = self.main
        return {
            "threads": [{k: int(v) for k, v in r.items()}
                        for r in self.threads.to_dict("records")],
            "main_thread": None if main is None else {
                "pid": int(main["pid"]), "tid": int(main["tid"]),
                **{f"{k}_ns": int(main[f"{k}_ns"])
                   for k in ("window", "api", "op", "os", "between", "sync")},
                "per_step": {f"{k}_ns": main[f"{k}_ns"] / per
                             for k in ("window", "api", "op", "os", "between", "sync")},
                "shares": {k: main[f"{k}_ns"] / main["window_ns"] if main["window_ns"]
                           else None for k in ("api", "op", "os", "between")}},
            "between_ops_what": self.between_what,
            "apis": [{"name": r.name, "calls": int(r.calls), "total_ns": int(r.total_ns),
                      "per_step_ns": r.total_ns / per, "calls_per_step": r.calls / per}
                     for r in self.apis.itertuples(index=False)],
        }


def _starts_inside(t: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """Per time: does it fall inside one of the sorted, disjoint windows [ws, we)."""
    k = np.searchsorted(we, t, side="right")
    return (k < len(we)) & (ws[np.minimum(k, len(ws) - 1)] <= t)


def host_split(trace: Trace, ws: np.ndarray, we: np.ndarray, steps: int) -> HostSplit:
    """Split each launching thread's time inside the wall windows ``ws``/``we``."""
    ev = trace.events
    rt_idx = np.flatnonzero(is_in(ev["kind"], "runtime"))
    op_idx = np.flatnonzero(is_in(ev["kind"], "op"))
    os_idx = np.flatnonzero(is_in(ev["kind"], "os"))
    launch = rt_idx[ev["launch_id"].to_numpy(np.int64)[rt_idx] >= 0]
    if not len(launch) or not len(ws):
        return HostSplit(pd.DataFrame([], columns=THREAD_COLUMNS),
                         pd.DataFrame([], columns=API_COLUMNS), steps)
    pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    # launches made inside the windows: the thread that made the most leads
    ends_in = _starts_inside(ts[launch], ws, we)
    counts = pd.Series(1, index=pd.MultiIndex.from_arrays(
        [pid[launch][ends_in], tid[launch][ends_in]])).groupby(level=[0, 1]).sum()
    counts = counts.sort_values(ascending=False, kind="stable")
    window = int((we - ws).sum())
    sync_call = per_distinct(ev["name"], lambda c: np.array([is_sync_call(str(n)) for n in c]),
                             fill=False)
    rows = []
    for (p, t), n in counts.items():
        rt = rt_idx[(pid[rt_idx] == p) & (tid[rt_idx] == t)]
        op = op_idx[(pid[op_idx] == p) & (tid[op_idx] == t)]
        api = int(union_in_windows(ts[rt], end[rt], ws, we).sum())
        both = np.concatenate([rt, op])
        covered = int(union_in_windows(ts[both], end[both], ws, we).sum())
        oss = os_idx[(pid[os_idx] == p) & (tid[os_idx] == t)]
        every = np.concatenate([both, oss])
        with_os = int(union_in_windows(ts[every], end[every], ws, we).sum())
        sync = rt[sync_call[rt]]  # API time that is the host waiting for the device
        rows.append((p, t, int(n), window, api, covered - api, with_os - covered,
                     window - with_os,
                     int(union_in_windows(ts[sync], end[sync], ws, we).sum())))
    threads = pd.DataFrame(rows, columns=THREAD_COLUMNS)
    if not rows:  # no launch call inside the windows
        return HostSplit(threads, pd.DataFrame([], columns=API_COLUMNS), steps)
    p, t = rows[0][0], rows[0][1]
    rt = rt_idx[(pid[rt_idx] == p) & (tid[rt_idx] == t)]
    # a call's time inside the windows (calls do not nest on one thread, except a call
    # recorded twice, nsys' inner record: its outer one counts)
    # the names' codes, not the column as text: one string per row of the whole trace
    # cost more than the rest of the split
    name = categorical_of(ev["name"])
    part = union_per_name(name.codes[rt], name.categories, ts[rt], end[rt], ws, we)
    return HostSplit(threads, part, steps, between_ops_what(trace.meta, ev["name"], p, t))


def union_per_name(codes: np.ndarray, categories: pd.Index, ts: np.ndarray,
                   end: np.ndarray, ws: np.ndarray, we: np.ndarray) -> pd.DataFrame:
    """Per API name (``codes`` into ``categories``, -1 missing: "nan"): calls starting
    inside the windows and the union of their time there."""
    # a group per distinct text (a name's text, as the table shows it), from the few
    # distinct names, not the rows
    labels = np.append(np.asarray(categories.astype(str), dtype=object), "nan")
    label_codes, names = pd.factorize(labels)
    group = label_codes[np.asarray(codes, dtype=np.int64)]  # -1 reads the last: "nan"
    calls = np.bincount(group, weights=_starts_inside(ts, ws, we),
                        minlength=len(names)).astype(np.int64)
    total = union_per_group(group, ts, end, ws, we, len(names))
    keep = (calls > 0) | (total > 0)  # a name not among the calls has neither
    table = pd.DataFrame({"name": np.asarray(names, dtype=object)[keep],
                          "calls": calls[keep], "total_ns": total[keep]},
                         columns=API_COLUMNS)
    return table.sort_values(["total_ns", "name"], ascending=[False, True],
                             ignore_index=True)


def union_per_group(group: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                    ws: np.ndarray, we: np.ndarray, n: int) -> np.ndarray:
    """Per group 0..n-1: the length of the union of its intervals inside the sorted,
    disjoint windows (``union_in_windows`` of each group, summed, in one pass)."""
    g, s, e = union_blocks_by_group(group, starts, ends)
    out = np.zeros(n, dtype=np.int64)
    # the blocks of a group are disjoint: their lengths inside the windows add up
    np.add.at(out, g, clipped_lengths(s, e, ws, we))
    return out


def per_device_op_ns(step_ns: float | None, device_ops: int, steps: int) -> float | None:
    """Host time per device op: a step's time over the device ops it ran."""
    if step_ns is None or not device_ops:
        return None
    return step_ns / (device_ops / max(steps, 1))


def _json(s: Summary, top: int) -> dict[str, Any]:
    """``host`` of ``--json``: the split, and the step per kernel (None on a CPU trace)."""
    if s.host is None:
        return {"host": None}
    return {"host": s.host.to_dict() | {"per_kernel_ns": s.host_per_kernel_ns,
                                        "kernels_per_step": s.kernel_count / max(s.steps, 1)}}


def _compute(i: Inputs, s: Summary) -> HostSplit | None:
    """Launching threads' time by cause (GPU traces)."""
    return None if s.cpu_trace else host_split(i.trace, i.ws, i.we, s.steps)


SECTION = Section(_json, _compute)
