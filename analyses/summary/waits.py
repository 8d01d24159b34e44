"""Why the device waits: each window's time by cause, and the host wait split by what the
host was doing.

Within a device's windows every moment goes to the first of these that holds it
(``BUDGET``, the ``*_ns`` columns of ``steps``):

- ``startup_ns``: start-up (``startup_calls.py``): autotuning whatever the device does, a
  start-up call while the device waits for the host (nothing runs, nothing is pending);
- ``busy_ns``: the device runs work;
- ``input_ns``: the device idles inside an input call (``table/input_calls.py``);
- ``queued_ns``: the device idles while launched work waits (a stream, an event, a
  collective);
- ``host_ns``: the device waits for the host, for any other reason.

They add up to the window. The **host wait** (``summary.host_wait_ns``: idle with nothing
launched pending) is split by what the host was doing (``CAUSES``, the ``wait_*_ns``
columns), adding up to it: ``startup`` and ``input`` as above; then, on the thread that
launched the work that ended the wait (the one the device was waiting for; where no work
follows, the nearest launch before), the first of: a runtime or driver call by its kind
(``host_calls.API_KINDS``: launch calls, synchronous copies, synchronization,
allocation, context and module set-up, stream and event creation, other calls), an OS
call or a stretch off the CPU by its kind (``host_calls.OS_KINDS``: sleep, I/O, locks,
other OS calls, scheduled out), a framework op (``ops``: its time outside the calls
above), else ``untraced``: nothing recorded on that thread (Python, or code the profiler
did not see). ``names`` holds what took each cause (a call's name; for ops the outermost
op; for untraced time the functions the thread's CPU samples caught there, each piece
shared among its samples, where nsys sampled), ``ranges`` the innermost user range it
ran in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import groups
from traceviz.algos.intervals import (
    covering,
    elementary,
    union_blocks,
)
from traceviz.analyses.summary.host_threads import (  # noqa: F401 (waits' names)
    CAUSES,
    LONG_UNTRACED_NS,
    caught_by_samples,
    launch_threads,
    refine,
    thread_rows,
    waiting_threads,
)
from traceviz.analyses.summary.idle_breakdown import _pending, _Rows
from traceviz.analyses.summary.pipeline import input_blocks
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.analyses.summary.startup_calls import Startup, find_startup

if TYPE_CHECKING:  # types only: figures.py imports the registry, which imports this
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace

BUDGET = ("startup", "busy", "input", "queued", "host")


@dataclass(frozen=True)
class HostWait:
    """The windows' time by cause and the host wait by what the host did (GPU traces)."""

    steps: pd.DataFrame      # device, step, start_ns, end_ns, BUDGET *_ns, wait_<cause>_ns
    names: pd.DataFrame      # cause, name, ns: what held the host wait, per cause
    ranges: pd.DataFrame     # cause, range, ns: the innermost user range it ran in
    startup: Startup
    before_ns: int           # start-up before the first window (per device, summed)
    before_span_ns: int = 0  # the recorded time before the first window (likewise)

    def total(self, column: str) -> int:
        return int(self.steps[column].sum()) if len(self.steps) else 0

    @property
    def causes(self) -> dict[str, int]:
        """The host wait per cause, over every window (they add up to the host wait)."""
        return {c: self.total(f"wait_{c}_ns") for c in CAUSES}

    @property
    def steps_count(self) -> int:
        """The step windows (0: none): what ``per_step_ns`` divides by."""
        return int(self.steps.loc[self.steps["step"] >= 0, "step"].nunique())

    def to_dict(self, top: int = 5) -> dict[str, Any]:
        per = max(self.steps_count, 1)

        def listed(frame: pd.DataFrame, key: str, cause: str) -> list[dict]:
            rows = frame[frame["cause"] == cause].head(top)
            return [{key: str(r[key]), "ns": int(r["ns"]), "per_step_ns": r["ns"] / per}
                    for _, r in rows.iterrows()]

        wait = sum(self.causes.values())
        return {
            "budget": {f"{b}_ns": self.total(f"{b}_ns") for b in BUDGET},
            "host_wait_ns": wait,
            "steps": self.steps_count,
            "causes": {c: {"ns": ns, "per_step_ns": ns / per,
                           "share": ns / wait if wait else None,
                           "names": listed(self.names, "name", c),
                           "ranges": listed(self.ranges, "range", c)}
                       for c, ns in self.causes.items() if ns},
            "startup": self.startup.to_dict() | {"before_windows_ns": self.before_ns,
                                                 "recorded_before_ns": self.before_span_ns},
            "per_step": [{k: (int(v) if k != "device" else int(v)) for k, v in r.items()}
                         for r in self.steps.to_dict("records")],
        }


def host_wait(trace: Trace, work: pd.DataFrame, windows: dict[int, pd.DataFrame],
              ws_all: np.ndarray, we_all: np.ndarray) -> HostWait | None:
    """The windows' time by cause and the host wait by what the host did; None on a CPU
    trace or where no device's launches are in the trace."""
    if trace.is_cpu or not len(work):
        return None
    startup = find_startup(trace, ws_all, we_all)
    ib, ie, _ = input_blocks(trace)
    threads, shown = thread_rows(trace)
    lpid, ltid = launch_threads(trace, work)
    launched = lpid >= 0
    if not launched.any():
        return None
    pairs = pd.Series(1, index=pd.MultiIndex.from_arrays([lpid[launched], ltid[launched]]))
    main = pairs.groupby(level=[0, 1]).sum().idxmax()
    ev = trace.events
    host_rows = ev["device"].to_numpy() < 0
    first_host = int(ev["ts_ns"].to_numpy(np.int64)[host_rows].min()) if host_rows.any() \
        else int(ws_all[0]) if len(ws_all) else 0
    every = _Rows.of(work)
    step_frames: list[pd.DataFrame] = []
    pieces: list[tuple] = []  # (device, window, ns, cause, name, range): arrays or scalars
    before, before_span = 0, 0
    sampled: list[pd.DataFrame] = []
    for device, idx in groups(work["device"].to_numpy(np.int64)):
        win = windows.get(device)
        rows = every.take(idx)
        if win is None or not rows.launched.any():
            continue
        ws, we = win["start_ns"].to_numpy(np.int64), win["end_ns"].to_numpy(np.int64)
        bb, be = union_blocks(rows.start, rows.end)
        ps, pe = _pending(rows, 0)
        ob, oe = union_blocks(np.r_[rows.start, ps], np.r_[rows.end, pe])
        sets = {"b": (bb, be), "o": (ob, oe), "i": (ib, ie),
                "t": (startup.tune_start, startup.tune_end),
                "c": (startup.calls_start, startup.calls_end)}
        lo, hi = elementary(ws, we, *[x for pair in sets.values() for x in pair])
        inside = covering(ws, we, lo)
        lo, hi = lo[inside], hi[inside]
        at = {k: covering(s, e, lo) for k, (s, e) in sets.items()}
        k = np.searchsorted(ws, lo, side="right") - 1
        length = hi - lo
        # a start-up call counts while the device waits for the host (a launch held by a
        # full queue waits for the device)
        budget = np.select([at["t"], at["b"], at["c"] & ~at["o"], at["i"], at["o"]],
                           [0, 1, 0, 2, 3], 4)
        parts = np.bincount(k * len(BUDGET) + budget, weights=length,
                            minlength=len(ws) * len(BUDGET)).reshape(len(ws), len(BUDGET))
        frame = pd.DataFrame({"device": device, "k": np.arange(len(ws)),
                              "step": win["step"].to_numpy(np.int64),
                              "start_ns": ws, "end_ns": we})
        for j, b in enumerate(BUDGET):
            frame[f"{b}_ns"] = parts[:, j].astype(np.int64)
        # the host wait: idle with nothing launched pending
        h = ~at["o"]
        start_up = h & (at["t"] | at["c"])
        inp = h & ~start_up & at["i"]
        rest = h & ~start_up & ~inp
        pieces.append((device, k[start_up], length[start_up], 0, -1, -1))
        pieces.append((device, k[inp], length[inp], 1, -1, -1))
        hb, he = union_blocks(lo[h], hi[h])
        tp, tt = waiting_threads(ps, lpid[idx], ltid[idx], he, main)
        blk = np.searchsorted(hb, lo[rest], side="right") - 1
        r_lo, r_hi, r_p, r_t = lo[rest], hi[rest], tp[blk], tt[blk]
        for _, g in groups(r_p * (1 << 32) + (r_t & 0xFFFFFFFF)):
            th = threads.get((int(r_p[g[0]]), int(r_t[g[0]])))
            s, e, cause, name, rng = refine(th, r_lo[g], r_hi[g])
            if (caught := caught_by_samples(th, s, e, cause)) is not None:
                sampled.append(caught)
            pieces.append((device, np.searchsorted(ws, s, side="right") - 1, e - s, cause,
                           name, rng))
        step_frames.append(frame)
        held, span = _startup_before(startup, first_host, int(ws[0]))
        before, before_span = before + held, before_span + span
    if not step_frames:
        return None
    return _assemble(step_frames, pieces, shown, startup, before, before_span, sampled)


def _startup_before(startup: Startup, first_host: int, first_window: int) -> tuple[int, int]:
    """Start-up before the first window: the recorded time it held, and that span."""
    held = 0
    for s, e in ((startup.calls_start, startup.calls_end),
                 (startup.tune_start, startup.tune_end)):
        cut = np.minimum(e, first_window) - np.maximum(s, first_host)
        held += int(cut[cut > 0].sum())
    return held, max(first_window - first_host, 0)


def _assemble(step_frames: list[pd.DataFrame], pieces: list[tuple], shown: pd.Index,
              startup: Startup, before: int, before_span: int,
              sampled: list[pd.DataFrame]) -> HostWait:
    """The pieces of host wait summed per window, per cause and name, per cause and range
    (summed in numpy: a few windows and pieces, where pandas' groupby, unstack and merge
    took ~20 ms)."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("device", "k", "ns", "cause", "name",
                                                          "range")}
    for device, k, ns, cause, name, rng in pieces:
        n = len(k)
        cols["device"].append(np.full(n, device, np.int64))
        cols["k"].append(np.asarray(k, np.int64))
        cols["ns"].append(np.asarray(ns, np.int64))
        for key, v in (("cause", cause), ("name", name), ("range", rng)):
            cols[key].append(np.broadcast_to(np.asarray(v, np.int64), (n,)))
    p = {key: np.concatenate(v) for key, v in cols.items()}
    steps = pd.concat(step_frames, ignore_index=True)
    steps = pd.concat([steps, pd.DataFrame(_wait_columns(steps, p), index=steps.index)],
                      axis=1)
    labels = np.append(np.asarray(shown, dtype=object), np.array([None], dtype=object))
    return HostWait(steps.drop(columns="k"), _by(p, "name", labels, sampled),
                    _by(p, "range", labels, []), startup, before, before_span)


def _wait_columns(steps: pd.DataFrame, p: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per window (a row of ``steps``): the pieces' host wait per cause, the
    ``wait_<cause>_ns`` columns (a piece outside every window counts nowhere)."""
    out = np.zeros((len(steps), len(CAUSES)), dtype=np.int64)
    device = steps["device"].to_numpy(np.int64)
    # the windows' rows per (device, k): each device's windows are k = 0, 1, ... in turn
    devices = np.unique(device)
    first = np.searchsorted(device, devices) if (np.diff(device) >= 0).all() else \
        np.array([np.flatnonzero(device == d)[0] for d in devices], dtype=np.int64)
    count = np.array([int((device == d).sum()) for d in devices], dtype=np.int64)
    j = np.minimum(np.searchsorted(devices, p["device"]), max(len(devices) - 1, 0))
    hit = (devices[j] == p["device"]) & (p["k"] >= 0) & (p["k"] < count[j]) \
        if len(devices) else np.zeros(len(p["k"]), dtype=bool)
    row = first[j] + p["k"] if len(devices) else p["k"]
    np.add.at(out, (row[hit], p["cause"][hit]), p["ns"][hit])
    return {f"wait_{c}_ns": out[:, j] for j, c in enumerate(CAUSES)}


def _by(p: dict[str, np.ndarray], key: str, labels: np.ndarray,
        sampled: list[pd.DataFrame]) -> pd.DataFrame:
    """The host wait per (cause, ``key``), by cause, most first: ``cause``, ``key``, ``ns``
    (with the CPU samples' shares of untraced time, where a thread was sampled)."""
    at = p[key] >= 0
    if sampled:  # float shares: summed as pandas sums them, then rounded
        named = pd.DataFrame({"cause": p["cause"][at], key: p[key][at], "ns": p["ns"][at]})
        named = pd.concat([named, *sampled], ignore_index=True)
        t = named.groupby(["cause", key])["ns"].sum().round().astype(np.int64).reset_index()
        cause, which, ns = (t[c].to_numpy() for c in ("cause", key, "ns"))
    else:  # whole nanoseconds: the sums are exact in any order
        pair = p["cause"][at] * len(labels) + p[key][at]
        uniq, inv = np.unique(pair, return_inverse=True)
        ns = np.zeros(len(uniq), dtype=np.int64)
        np.add.at(ns, inv, p["ns"][at])
        cause, which = np.divmod(uniq, len(labels))
    t = pd.DataFrame({"cause": np.asarray(CAUSES, dtype=object)[cause],
                      key: labels[which], "ns": ns})
    return t.sort_values(["cause", "ns"], ascending=[True, False], ignore_index=True)


def _compute(i: Inputs, s: Summary) -> HostWait | None:
    """The windows' time by cause and the host wait by what the host did (GPU traces)."""
    return host_wait(i.trace, i.work, i.windows, i.ws, i.we)


def _json(s: Summary, top: int) -> dict[str, Any]:
    w = s.host_wait_split
    return {"host_wait_split": None if w is None else w.to_dict()}


SECTION = Section(_json, _compute)
