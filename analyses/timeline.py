"""The trace as a timeline a viewer can draw: device rows on lanes where no two overlap,
the idle intervals of each device by cause, and the queue depth over time.

Timeline viewers (Perfetto, chrome://tracing) draw a track's complete events as a stack:
an event that starts inside another and ends after it is dropped or drawn wrongly, and
users lose kernels that way (overlapping kernels of one stream, as some profilers record
them). ``lanes`` gives each device row a lane of its stream such that a lane's rows never
overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import groups
from traceviz.algos.intervals import union_blocks
from traceviz.analyses.summary.idle_breakdown import _pending, _Rows
from traceviz.analyses.work import analysis_windows, work_rows

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace


def lanes(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row, its lane on its track (0 for most) such that a lane's rows never overlap:
    for device rows, which do not nest. Each pass keeps, of the rows still without a
    lane, those that start after every earlier one of them (in start order) has ended,
    and gives them the next lane: as many vectorized passes as rows overlap at most."""
    n = len(start)
    lane = np.full(n, -1, np.int64)
    order = np.lexsort((start, track))
    t, s, e = track[order], start[order], end[order]
    todo = np.arange(n)
    k = 0
    while len(todo):
        tt, ss, ee = t[todo], s[todo], e[todo]
        first = np.r_[True, tt[1:] != tt[:-1]] if len(todo) else np.zeros(0, bool)
        # the latest end before each row among the rows left, per track
        prev_end = pd.Series(np.where(first, np.iinfo(np.int64).min, np.roll(ee, 1))) \
            .groupby(np.cumsum(first)).cummax().to_numpy(np.int64)
        ok = first | (ss >= prev_end)
        lane[order[todo[ok]]] = k
        todo = todo[~ok]
        k += 1
    return lane


def idle_intervals(trace: Trace, windows: dict[int, pd.DataFrame] | None = None
                   ) -> pd.DataFrame:
    """Per device, the intervals of its windows when it was idle, and why: ``host_wait``
    (nothing ran and nothing launched was pending: the host was still to launch it) or
    ``queued`` (launched work was pending); the same split as ``analyze``'s, so their
    lengths sum to its ``host_wait_ns`` and ``queued_idle_ns``. ``windows``: the trace's
    analysis windows where the caller has them."""
    cols = ["device", "kind", "start_ns", "end_ns"]
    if trace.is_cpu:
        return pd.DataFrame(columns=cols)
    work = work_rows(trace)
    windows = analysis_windows(trace, work) if windows is None else windows
    every = _Rows.of(work)
    out = []
    for device, idx in groups(work["device"].to_numpy(np.int64)):
        win = windows.get(device)
        rows = every.take(idx)
        if win is None or not rows.launched.any():
            continue
        ps, pe = _pending(rows, 0)
        busy = union_blocks(rows.start, rows.end)
        occupied = union_blocks(np.concatenate([rows.start, ps]), np.concatenate([rows.end, pe]))
        ws, we = win["start_ns"].to_numpy(np.int64), win["end_ns"].to_numpy(np.int64)
        # every boundary, then each elementary segment labelled by what covers it
        cuts = np.unique(np.concatenate([ws, we, *busy, *occupied]))
        a, b = cuts[:-1], cuts[1:]
        mid = a + (b - a) // 2

        def inside(blocks: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
            i = np.searchsorted(blocks[0], t, side="right") - 1
            return (i >= 0) & (t < blocks[1][np.maximum(i, 0)])

        in_win = inside((ws, we), mid) & (b > a)
        label = np.where(inside(busy, mid), 0, np.where(inside(occupied, mid), 2, 1))
        keep = in_win & (label > 0)
        a, b, label = a[keep], b[keep], label[keep]
        # merge touching segments of one label
        new = np.r_[True, (a[1:] != b[:-1]) | (label[1:] != label[:-1])]
        grp = np.cumsum(new) - 1
        starts = a[new]
        ends = pd.Series(b).groupby(grp).max().to_numpy(np.int64)
        out.append(pd.DataFrame({"device": device,
                                 "kind": np.where(label[new] == 1, "host_wait", "queued"),
                                 "start_ns": starts, "end_ns": ends}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)


def queue_depth(trace: Trace) -> pd.DataFrame:
    """Per device, the number of launched rows not yet started, at every change: +1 at a
    launch call's end, -1 when the row starts (rows launched before the trace: from its
    start, as ``analyze``'s queue depth counts them)."""
    cols = ["device", "ts_ns", "depth"]
    if trace.is_cpu:
        return pd.DataFrame(columns=cols)
    work = work_rows(trace)
    every = _Rows.of(work)
    out = []
    for device, idx in groups(work["device"].to_numpy(np.int64)):
        rows = every.take(idx)
        if not rows.launched.any():
            continue
        ps, pe = _pending(rows, 0)
        known = pe > ps
        t = np.concatenate([ps[known], pe[known]])
        step = np.concatenate([np.ones(known.sum(), np.int64), -np.ones(known.sum(), np.int64)])
        order = np.lexsort((step, t))  # at one moment, starts before launches
        t, depth = t[order], np.cumsum(step[order])
        last = np.r_[t[1:] != t[:-1], True]  # one value per moment
        out.append(pd.DataFrame({"device": device, "ts_ns": t[last], "depth": depth[last]}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)


@dataclass
class StepRows:
    """One step as a timeline draws it: times in ns from the step's start."""

    step: int
    start_ns: int
    end_ns: int
    rows: pd.DataFrame       # row (in the trace), track, name, start_ns, end_ns, category,
    #                          op, details, delay
    launches: pd.DataFrame   # name, start_ns, end_ns (the host's launch calls)
    waits: pd.DataFrame      # track, start_ns, end_ns (host-wait intervals)
    rows_in_step: int        # device rows in the step, drawn or not
    note: str = ""
    cpu: bool = False        # a CPU trace: the rows are the host threads' CPU ops


def step_rows(trace: Trace, budget: int) -> StepRows:
    """The step of median length (the whole trace without steps), its device rows on
    their stream lanes: at most ``budget`` of them, the longest, with a note saying how
    many are left out and their time. A CPU trace (no device rows) draws its CPU ops
    (``work_rows``: the leaf ops that play the kernels) on a track per host thread."""
    from traceviz.table.schema import DEVICE_KINDS
    from traceviz.units import fmt_ns, plural

    ev = trace.events
    windows = analysis_windows(trace)
    w = pd.concat(windows.values()).groupby("step", sort=False).agg(
        start_ns=("start_ns", "min"), end_ns=("end_ns", "max")).reset_index() \
        if windows else pd.DataFrame({"step": [-1], "start_ns": [0], "end_ns": [0]})
    length = (w["end_ns"] - w["start_ns"]).to_numpy()
    pick = int(np.argsort(length, kind="stable")[len(length) // 2])
    step, ws, we = int(w["step"].iloc[pick]), int(w["start_ns"].iloc[pick]), \
        int(w["end_ns"].iloc[pick])
    cpu = trace.is_cpu
    what = "CPU op" if cpu else "device row"
    dev = work_rows(trace) if cpu else ev[ev["kind"].isin(DEVICE_KINDS).to_numpy()]
    s0 = dev["ts_ns"].to_numpy(np.int64)
    e0 = s0 + dev["dur_ns"].to_numpy(np.int64)
    inside = (e0 > ws) & (s0 < we)
    dev, s0, e0 = dev[inside], s0[inside], e0[inside]
    total = len(dev)
    note = ""
    if total > budget:
        keep = np.sort(np.argsort(-(e0 - s0), kind="stable")[:budget])
        left = np.setdiff1d(np.arange(total), keep)
        note = (f"{plural(total, what)} in this step: the {budget:,} longest are drawn, "
                f"{len(left):,} shorter ones ({fmt_ns(int((e0 - s0)[left].sum()))} in all) "
                "are left out to keep the file small")
        dev, s0, e0 = dev.iloc[keep], s0[keep], e0[keep]
    if cpu:  # a track per host thread; nested ops (none among leaves) on lanes of it
        tid = dev["tid"].to_numpy(np.int64)
        lane = lanes(tid, s0, e0)
        track = [f"thread {t}" + (f" lane {k}" if k else "")
                 for t, k in zip(tid, lane, strict=True)]
    else:
        device = dev["device"].to_numpy(np.int64)
        stream = dev["stream"].to_numpy(np.int64)
        lane = lanes(device * (1 << 32) + stream, s0, e0)
        track = [f"GPU {d} stream {s}" + (f" lane {k}" if k else "")
                 for d, s, k in zip(device, stream, lane, strict=True)]
    delay = dev["launch_delay_ns"]
    rows = pd.DataFrame({
        "row": dev.index.to_numpy(), "track": track, "name": dev["name"].astype(str).to_numpy(),
        "start_ns": s0 - ws, "end_ns": e0 - ws,
        "category": dev["category"].astype(str).to_numpy(),
        "op": dev["op"].astype(object).where(dev["op"].notna(), "").astype(str).to_numpy(),
        "details": dev["details"].astype(object).where(dev["details"].notna(), "")
        .astype(str).to_numpy() if "details" in dev else "",
        "delay": [fmt_ns(x) if x is not pd.NA and x == x else "–" for x in delay.astype(object)],
        "shapes": _shapes(dev["details"]) if cpu and "details" in dev
        else _op_shapes(trace, dev),
    })
    calls = ev[(ev["kind"] == "runtime").to_numpy() & (ev["launch_id"] >= 0).to_numpy()]
    cs = calls["ts_ns"].to_numpy(np.int64)
    ce = cs + calls["dur_ns"].to_numpy(np.int64)
    mine = np.flatnonzero((ce > ws) & (cs < we))
    launches = pd.DataFrame({"name": calls["name"].astype(str).to_numpy()[mine],
                             "start_ns": cs[mine] - ws, "end_ns": ce[mine] - ws})
    if len(mine) > budget:  # join calls close together into bands, none left out
        tol = max((we - ws) // (2 * budget), 1)
        bs, be = union_blocks(cs[mine], ce[mine] + tol)
        n = np.bincount(np.searchsorted(bs, cs[mine], side="right") - 1, minlength=len(bs))
        launches = pd.DataFrame({"name": [plural(int(k), "launch call") for k in n],
                                 "start_ns": bs - ws, "end_ns": be - tol - ws})
        note = (note + "; " if note else "") + (
            f"{len(mine):,} launch calls drawn as {len(bs):,} bands (calls under "
            f"{fmt_ns(tol)} apart joined)")
    iv = idle_intervals(trace)
    iv = iv[(iv["kind"] == "host_wait").to_numpy() & (iv["end_ns"] > ws).to_numpy()
            & (iv["start_ns"] < we).to_numpy()]
    waits = pd.DataFrame({"track": [f"GPU {int(d)} idle" for d in iv["device"]],
                          "start_ns": iv["start_ns"].to_numpy(np.int64) - ws,
                          "end_ns": iv["end_ns"].to_numpy(np.int64) - ws})
    return StepRows(step, ws, we, rows, launches, waits, total, note, cpu)


def _op_shapes(trace: Trace, dev: pd.DataFrame) -> list[str]:
    """Per device row: the input shapes recorded on the op it ran for ("" where none)."""
    from traceviz.analyses.efficiency.ops import op_of_kernels

    op_row = op_of_kernels(trace, dev)
    details = trace.events["details"].astype(object).to_numpy() \
        if "details" in trace.events else None
    if details is None or not len(op_row):
        return [""] * len(dev)
    return _shapes(np.where(op_row >= 0, details[np.maximum(op_row, 0)], ""))


def _shapes(text: Any) -> list[str]:
    """Per op's details, its input shapes ("dims:[[2, 3], [3]] types:[...]": the dims, as
    the op recorded them; "" where none)."""
    return [t.split(" types:")[0].removeprefix("dims:")[:160] if isinstance(t, str)
            and t.startswith("dims:") else "" for t in text]
