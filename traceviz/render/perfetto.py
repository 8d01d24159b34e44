"""The trace as a Chrome trace-event JSON (what ui.perfetto.dev and chrome://tracing open),
with what traceviz found as tracks of their own.

Tracks: the host's threads as recorded (runtime calls, framework ops, ranges, step marks);
per device a process with a thread per stream, and more lanes of a stream where its rows
overlap (a viewer drops events that overlap on one track);
a ``traceviz`` process with the step windows and, per device, its idle intervals by cause
(host wait, queued). Every device row carries its category, op, launch delay and cast
flag as arguments (a cast's category reads ``cast``); a flow arrow runs from each launch
call to each row it launched; the queue depth is a counter per device. Times are
microseconds from the trace's first event (``otherData.origin_ns`` gives the clock).
The events are written by pandas' JSON writer from columns (a row's arguments are its
one small dict). What traceviz found is assembled before (``analyses/shown/perfetto_tracks``:
the lanes, windows, idle intervals, queue depth and critical path); this module draws it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from traceviz.analyses.shown.perfetto_tracks import PerfettoTracks
from traceviz.table.schema import DEVICE_KINDS
from traceviz.trace import Trace

# device processes and traceviz's own sit above every host pid of the trace: a device's is
# base + its id, traceviz's base + TRACEVIZ (otherData.device_pid_base gives the base)
PID_STEP = 1_000_000
TRACEVIZ = PID_STEP - 1
LANE = 1000                  # a stream's lane k is thread stream * LANE + k
_STEPS_TID, _IDLE_TID = 1, 10   # + device for the idle tracks
_COLORS = {"gemm": "thread_state_running", "attention": "rail_animation",
           "rnn": "rail_response", "elementwise": "thread_state_runnable",
           "reduction": "rail_load", "cast": "terrible", "memcpy": "thread_state_iowait",
           "memset": "thread_state_iowait", "communication": "cq_build_running",
           "other": "generic_work"}


def _us(ns: np.ndarray | pd.Series) -> np.ndarray:
    return np.round(np.asarray(ns, dtype=np.float64) / 1000.0, 3)


def _records(df: pd.DataFrame) -> str:
    """The frame's rows as JSON objects, comma-joined (no brackets)."""
    if df.empty:
        return ""
    return df.to_json(orient="records", force_ascii=False, double_precision=15)[1:-1]


def perfetto_json(trace: Trace, tracks: PerfettoTracks) -> str:
    """The Chrome trace-event JSON text of ``trace`` with its ``tracks``; where they hold
    a critical path, its device rows carry ``critical_path: true``."""
    ev = trace.events
    base = pid_base(trace)
    parts = [_metadata(trace, base), _host_events(ev), *_device_events(trace, tracks, base),
             _windows(tracks.windows, base), _idle(tracks.idle, base),
             _counters(tracks.queue, base)]
    body = ",".join(p for p in parts if p)
    other = {"traceviz": "traceviz", "origin_ns": int(trace.meta.get("origin_ns", 0)),
             "device_pid_base": base,
             "source_file": trace.meta.get("source_file"),
             "source_format": trace.meta.get("source_format")}
    return ('{"displayTimeUnit": "ns", "otherData": ' + json.dumps(other, default=str)
            + ', "traceEvents": [' + body + "]}\n")


def pid_base(trace: Trace) -> int:
    """The first multiple of PID_STEP above every host pid of the trace."""
    pids = trace.events["pid"].to_numpy(np.int64)
    top = int(pids.max()) if len(pids) else 0
    return (max(top, 0) // PID_STEP + 1) * PID_STEP


def _metadata(trace: Trace, base: int) -> str:
    ev = trace.events
    host = ev[(ev["device"] < 0).to_numpy() & (ev["pid"] >= 0).to_numpy()]
    threads = host[["pid", "tid"]].drop_duplicates()
    dev = ev[ev["kind"].isin(DEVICE_KINDS).to_numpy()]
    names = (trace.meta.get("devices") or {})
    rows: list[dict[str, Any]] = []
    rows += [{"ph": "M", "name": "process_name", "pid": int(p), "tid": 0,
              "args": {"name": f"host process {int(p)}"}} for p in threads["pid"].unique()]
    known = trace.meta.get("thread_names") or {}  # the profiler's names, where it kept them
    rows += [{"ph": "M", "name": "thread_name", "pid": int(p), "tid": int(t),
              "args": {"name": known.get(f"{int(p)}:{int(t)}", f"thread {int(t)}")}}
             for p, t in threads.itertuples(index=False)]
    for d in sorted(int(x) for x in dev["device"].unique()):
        label = names.get(str(d))
        rows.append({"ph": "M", "name": "process_name", "pid": base + d, "tid": 0,
                     "args": {"name": f"GPU {d}" + (f": {label}" if label else "")}})
        rows.append({"ph": "M", "name": "process_sort_index", "pid": base + d, "tid": 0,
                     "args": {"sort_index": d + 1}})
    rows += [{"ph": "M", "name": "process_name", "pid": base + TRACEVIZ, "tid": 0,
              "args": {"name": "traceviz"}},
             {"ph": "M", "name": "thread_name", "pid": base + TRACEVIZ, "tid": _STEPS_TID,
              "args": {"name": "step windows"}}]
    return ",".join(json.dumps(r) for r in rows)  # one per thread: few


def _host_events(ev: pd.DataFrame) -> str:
    host = ev[(ev["device"] < 0).to_numpy() & (ev["pid"] >= 0).to_numpy()
              & ev["kind"].isin(["runtime", "op", "annotation", "step"]).to_numpy()]
    df = pd.DataFrame({"name": host["name"].astype(str).to_numpy(), "cat": host["kind"].astype(str),
                       "ph": "X", "ts": _us(host["ts_ns"]), "dur": _us(host["dur_ns"]),
                       "pid": host["pid"].to_numpy(np.int64),
                       "tid": host["tid"].to_numpy(np.int64)})
    return _records(df)


def _device_events(trace: Trace, tracks: PerfettoTracks, base: int) -> list[str]:
    ev = trace.events
    is_dev = ev["kind"].isin(DEVICE_KINDS).to_numpy()
    dev = ev[is_dev]
    if dev.empty:
        return []
    start = dev["ts_ns"].to_numpy(np.int64)
    end = start + dev["dur_ns"].to_numpy(np.int64)
    device = dev["device"].to_numpy(np.int64)
    stream = dev["stream"].to_numpy(np.int64)
    lane = tracks.lanes
    pid = base + device
    tid = stream * LANE + lane
    category = dev["category"].astype(str).to_numpy()
    on_path = np.isin(dev.index.to_numpy(), tracks.path) if tracks.path is not None \
        else None
    args = pd.DataFrame({
        "category": category,
        "op": dev["op"].astype(object).where(dev["op"].notna(), None).to_numpy(),
        "launch_delay_ns": dev["launch_delay_ns"].astype("Int64").astype(object)
        .where(dev["launch_delay_ns"].notna(), None).to_numpy(),
        "cast": dev["is_cast"].to_numpy(bool),
        "details": dev["details"].astype(object).where(dev["details"].notna(), "")
        .astype(str).to_numpy() if "details" in dev else "",
    })
    if on_path is not None:
        args["critical_path"] = on_path
    df = pd.DataFrame({"name": dev["name"].astype(str).to_numpy(), "cat": category,
                       "ph": "X", "ts": _us(start), "dur": _us(end - start),
                       "pid": pid, "tid": tid,
                       "cname": pd.Series(category).map(_COLORS).fillna("generic_work"),
                       "args": args.to_dict("records")})
    threads = pd.DataFrame({"pid": pid, "tid": tid, "stream": stream, "lane": lane}) \
        .drop_duplicates(["pid", "tid"])
    names = pd.DataFrame({
        "ph": "M", "name": "thread_name", "pid": threads["pid"], "tid": threads["tid"],
        "args": [{"name": f"stream {s}" + (f" (overlapping rows, lane {k})" if k else "")}
                 for s, k in zip(threads["stream"], threads["lane"], strict=True)]})
    return [_records(names), _records(df), _flows(ev, dev, pid, tid, start)]


def _flows(ev: pd.DataFrame, dev: pd.DataFrame, pid: np.ndarray, tid: np.ndarray,
           start: np.ndarray) -> str:
    """An arrow from each launch call to each row it launched (one id per row)."""
    linked = dev["launch_id"].to_numpy(np.int64) >= 0
    calls = ev[(ev["kind"] == "runtime").to_numpy() & (ev["launch_id"] >= 0).to_numpy()]
    calls = calls.drop_duplicates("launch_id").set_index("launch_id")
    lid = dev["launch_id"].to_numpy(np.int64)[linked]
    known = np.isin(lid, calls.index.to_numpy())
    lid = lid[known]
    if not len(lid):
        return ""
    c = calls.loc[lid]
    ids = np.arange(len(lid))
    src = pd.DataFrame({"name": "launch", "cat": "launch", "ph": "s", "id": ids,
                        "ts": _us(c["ts_ns"]), "pid": c["pid"].to_numpy(np.int64),
                        "tid": c["tid"].to_numpy(np.int64)})
    dst = pd.DataFrame({"name": "launch", "cat": "launch", "ph": "f", "bp": "e", "id": ids,
                        "ts": _us(start[linked][known]), "pid": pid[linked][known],
                        "tid": tid[linked][known]})
    return _records(src) + "," + _records(dst)


def _windows(w: pd.DataFrame, base: int) -> str:
    if w.empty:
        return ""
    df = pd.DataFrame({"name": [f"step {s}" if s >= 0 else "whole trace" for s in w["step"]],
                       "cat": "traceviz", "ph": "X", "ts": _us(w["start_ns"]),
                       "dur": _us(w["end_ns"] - w["start_ns"]), "pid": base + TRACEVIZ,
                       "tid": _STEPS_TID})
    return _records(df)


def _idle(iv: pd.DataFrame, base: int) -> str:
    if iv.empty:
        return ""
    devices = sorted(int(d) for d in iv["device"].unique())
    names = pd.DataFrame({"ph": "M", "name": "thread_name", "pid": base + TRACEVIZ,
                          "tid": [_IDLE_TID + d for d in devices],
                          "args": [{"name": f"GPU {d} idle: host wait / queued"}
                                   for d in devices]})
    kind = iv["kind"].to_numpy()
    df = pd.DataFrame({
        "name": np.where(kind == "host_wait", "host wait", "queued idle"),
        "cat": "traceviz", "ph": "X", "ts": _us(iv["start_ns"]),
        "dur": _us(iv["end_ns"] - iv["start_ns"]), "pid": base + TRACEVIZ,
        "tid": _IDLE_TID + iv["device"].to_numpy(np.int64),
        "cname": np.where(kind == "host_wait", "bad", "yellow")})
    return _records(names) + "," + _records(df)


def _counters(q: pd.DataFrame, base: int) -> str:
    if q.empty:
        return ""
    df = pd.DataFrame({"name": "queue depth", "ph": "C", "ts": _us(q["ts_ns"]),
                       "pid": base + q["device"].to_numpy(np.int64), "tid": 0,
                       "args": [{"launched, not started": int(d)} for d in q["depth"]]})
    return _records(df)
