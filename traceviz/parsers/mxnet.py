"""MXNet profiler output (``mx.profiler.dump()``): Chrome-trace JSON of another shape.

Kineto writes complete events (``ph: X``); MXNet writes each operator as a ``B``/``E``
pair on its device's process (``process_name`` ``cpu/0``, ``gpu/0``...) and thread, and
again as an async ``b``/``e`` pair, plus C-API calls and memory counters. Profiler
tasks (``mx.profiler.Domain(...).new_task``) are ``b``/``e`` pairs whose ``cat`` is the
domain name: the runner's ``step N`` tasks become steps. Thread ids are 64-bit hashes
beyond int64, so (pid, tid) pairs are renumbered.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from traceviz.errors import TraceVizError
from traceviz.files.fileio import open_input
from traceviz.parsers.normalize import BASE_COLUMNS, finish
from traceviz.parsers.numbers import checked_ints, dropped_note
from traceviz.table.meta import TraceMeta
from traceviz.table.steps import step_numbers
from traceviz.trace import Trace

SKIPPED_CATS = {"MXNET_C_API", "Device Storage", "operator"}  # for b/e: operator twins


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: int | float = -1
    pid: int | str = 0
    tid: int | str = 0
    id: int | str | None = None
    args: dict | None = None


class _Doc(msgspec.Struct, gc=False):
    traceEvents: list[_Event]  # noqa: N815 (the file's key)


def parse(path: Path) -> Trace:
    try:
        with open_input(path) as f:
            doc = msgspec.json.decode(f.read(), type=_Doc)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise TraceVizError(f"{path}: not a readable MXNet profile ({e})") from None
    except UnicodeDecodeError as e:
        raise TraceVizError(f"{path}: not valid UTF-8 text (byte {e.start})") from None
    except RecursionError:
        raise TraceVizError(f"{path}: JSON nested too deeply") from None
    events = doc.traceEvents
    if not events:
        raise TraceVizError(f"{path}: the MXNet profile holds no events")
    ts, bad = _us_to_ns([e.ts for e in events])
    ev = pd.DataFrame({
        "ph": [e.ph for e in events],
        "name": [e.name for e in events],
        "cat": [e.cat for e in events],
        "ts": ts,
        "pid": [str(e.pid) for e in events],
        "tid": [str(e.tid) for e in events],
        "id": [str(e.id) for e in events],
    })
    ev = ev[~bad]
    devices = {str(e.pid): str((e.args or {}).get("name", "")) for e in events
               if e.ph == "M" and e.name == "process_name"}
    ops = _pairs(ev[(ev["ph"].isin(["B", "E"])) & (ev["cat"] == "operator")],
                 ["pid", "tid", "name"], "B")
    tasks = _pairs(ev[ev["ph"].isin(["b", "e"]) & ~ev["cat"].isin(SKIPPED_CATS)],
                   ["cat", "id", "name"], "b")
    if ops.empty and tasks.empty:
        raise TraceVizError(f"{path}: no operator rows in the MXNet profile (was it "
                            "profiled with profile_all or profile_symbolic?)")
    ops["kind"] = "op"
    step_no, _ = step_numbers(tasks["name"])
    tasks["kind"] = np.where(step_no >= 0, "step", "annotation")
    tasks["step"] = step_no
    rows = pd.concat([ops, tasks], ignore_index=True)
    # 64-bit hashes -> small ids; operators run on device "processes" named cpu/0, gpu/0
    rows["pid"] = pd.factorize(rows["pid"])[0]
    rows["tid"] = pd.factorize(rows["pid"].astype(str) + "/" + rows["tid"])[0]
    rows["step"] = rows["step"].fillna(-1) if "step" in rows else -1
    base = pd.DataFrame({
        "kind": rows["kind"], "name": rows["name"].astype("category"),
        "ts_ns": rows["ts_ns"], "dur_ns": rows["dur_ns"], "pid": rows["pid"],
        "tid": rows["tid"], "device": -1, "stream": -1, "correlation": -1,
        "step": rows["step"].astype(np.int64), "bytes": -1,
    })[list(BASE_COLUMNS)]
    meta: TraceMeta = {"source_format": "mxnet", "source_file": str(path),
            "profiler": "mx.profiler", "devices": {},
            "mxnet_processes": sorted(set(devices.values()))}
    notes = dropped_note({"a timestamp beyond 64-bit nanoseconds": int(bad.sum())})
    if notes:
        meta["notes"] = notes
    return finish(base, meta)


def _us_to_ns(values: list) -> tuple[np.ndarray, np.ndarray]:
    """µs -> ns, exact for integers (MXNet writes integer µs since the epoch: 1.8e15,
    beyond float64's exact range once multiplied by 1000); the mask marks times that
    int64 ns cannot hold."""
    arr = np.asarray(values)
    if arr.dtype.kind == "i":
        bad = np.abs(arr) >= _MAX_US
        return np.where(bad, 0, arr) * 1000, bad
    if arr.dtype.kind == "f":  # fractional µs (still exact below 2^53 µs)
        fits = np.isfinite(arr) & (np.abs(arr) < _MAX_US)
        f = np.where(fits, arr, 0.0)
        whole = np.floor(f)
        return (whole.astype(np.int64) * 1000
                + np.round((f - whole) * 1000).astype(np.int64)), ~fits
    us, bad = checked_ints(values, bounds=(-_MAX_US, _MAX_US))  # huge ints among them
    return us * 1000, bad


_MAX_US = 9_000_000_000_000_000


def _pairs(ev: pd.DataFrame, key: list[str], begin: str) -> pd.DataFrame:
    """The k-th begin of each key with its k-th end: (name, pid, tid, ts_ns, dur_ns)."""
    if ev.empty:
        return pd.DataFrame(columns=["name", "pid", "tid", "ts_ns", "dur_ns"])
    ev = ev.sort_values("ts", kind="stable")
    is_begin = ev["ph"] == begin
    b, e = ev[is_begin].copy(), ev[~is_begin].copy()
    b["k"] = b.groupby(key, sort=False).cumcount()
    e["k"] = e.groupby(key, sort=False).cumcount()
    m = b.merge(e[[*key, "k", "ts"]], on=[*key, "k"], suffixes=("", "_end"))
    ts = m["ts"].to_numpy(np.int64)
    end = m["ts_end"].to_numpy(np.int64)
    keep = end >= ts
    return pd.DataFrame({"name": m["name"], "pid": m["pid"], "tid": m["tid"],
                         "ts_ns": ts, "dur_ns": end - ts})[keep].reset_index(drop=True)
