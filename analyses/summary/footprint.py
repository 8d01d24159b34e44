"""What a run costs in memory: the allocator's events of the profiled steps (torch.profiler
``profile_memory``) and the timed phase's peak that the runner measured (bench.json).

An allocator event's ``bytes`` is its signed size (a free is negative); the allocator's
total at each event is the device's base (``meta["memory_base"]``: what it held before
the first event) plus the running sum of sizes, exactly the ``Total Allocated`` Kineto
records with the event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.stats import plain_row
from traceviz.analyses.summary.phases import NO_PHASE, assign_phases, phase_ranges
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.table.schema import is_in

if TYPE_CHECKING:  # the Summary type only: figures.py imports the registry
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace


@dataclass
class Memory:
    devices: pd.DataFrame        # device, events, base, peak_allocated, allocated, freed
    phases: pd.DataFrame         # device, phase, events, allocated, freed (bytes)
    series: pd.DataFrame         # ts_ns, device, total (bytes), for the chart
    bench: dict[str, Any] | None  # the timed phase's peak (runner's probe)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not len(self.devices) and not self.bench

    def to_dict(self) -> dict[str, Any]:
        def rows(f: pd.DataFrame) -> list[dict]:
            return [plain_row(r) for r in f.to_dict("records")]

        return {"devices": rows(self.devices), "phases": rows(self.phases),
                "bench": self.bench, "notes": self.notes}


def _bases(given: object) -> dict[int, int]:
    """``meta["memory_base"]`` as {device: bytes}; entries that are not integers of sane
    size (a damaged or hand-edited file) are left out."""
    if not isinstance(given, dict):
        return {}
    out = {}
    for k, v in given.items():
        try:
            dev, val = int(k), int(v)
        except (TypeError, ValueError):
            continue
        if abs(val) < 2**60:
            out[dev] = val
    return out


def bench_memory(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """bench.json's ``memory`` with the device's memory from the device: ``total_bytes``
    is the memory the trace's device properties state (XSpace's device plane), else the
    runner's figure, which is the device's own (``torch.cuda.get_device_properties``)
    except in a JAX run from before ``pool_bytes``, where it was XLA's allocator pool
    (``bytes_limit``, by default 75% of the device). ``pool_bytes``: that pool, named as
    the pool; ``total_from``: where the device's figure came from."""
    given = (meta.get("bench") or {}).get("memory")
    if not isinstance(given, dict):
        return None
    mem = dict(given)
    jax = (meta.get("runner") or {}).get("framework") == "jax"
    if jax and "pool_bytes" not in mem and mem.get("total_bytes"):
        mem["pool_bytes"] = mem.pop("total_bytes")
    stated = [p.get("memory_bytes") for p in (meta.get("device_properties") or {}).values()
              if isinstance(p, dict) and isinstance(p.get("memory_bytes"), (int, float))
              and p["memory_bytes"] > 0]
    if stated:
        mem["total_bytes"], mem["total_from"] = int(stated[0] or 0), "the trace's device properties"
    elif mem.get("total_bytes"):
        mem["total_from"] = "the runner (the device's properties)"
    return mem


def memory(trace: Trace, wall_start: np.ndarray | None = None,
           wall_end: np.ndarray | None = None) -> Memory:
    """The memory figures of ``trace`` (phases are those that start inside the given
    wall windows, as the phase table counts them)."""
    ev = trace.events
    rows = ev.take(np.flatnonzero(is_in(ev["kind"], "memory")))
    bench = bench_memory(trace.meta)
    notes: list[str] = []
    base = _bases(trace.meta.get("memory_base"))
    limit = float(2**62)  # totals and sums must stay inside int64
    if len(rows) and float(np.abs(rows["bytes"].to_numpy(np.float64)).sum()) + max(
            (abs(v) for v in base.values()), default=0) >= limit:
        notes.append("The allocator events' sizes add up past 64-bit integers: no memory "
                     "figures.")
        rows = rows.iloc[:0]
    if not len(rows):
        if trace.meta.get("source_format") == "kineto":
            notes.append("No allocator events in the trace (torch.profiler "
                         "profile_memory=True records them).")
        empty = pd.DataFrame(columns=["device", "events", "base", "peak_allocated",
                                      "allocated", "freed"])
        return Memory(empty, pd.DataFrame(columns=["device", "phase", "events", "allocated",
                                                   "freed"]),
                      pd.DataFrame(columns=["ts_ns", "device", "total"]), bench, notes)
    rows = rows.sort_values("ts_ns", kind="stable")
    dev = rows["device"].to_numpy(np.int64)
    size = rows["bytes"].to_numpy(np.int64)
    start = pd.Series(dev).map(base).fillna(0).to_numpy(np.int64)
    total = start + pd.Series(size).groupby(dev).cumsum().to_numpy(np.int64)
    series = pd.DataFrame({"ts_ns": rows["ts_ns"].to_numpy(np.int64), "device": dev,
                           "total": total})
    f = pd.DataFrame({"device": dev, "alloc": np.where(size > 0, size, 0),
                      "free": np.where(size < 0, -size, 0), "total": total})
    devices = f.groupby("device").agg(events=("alloc", "size"), peak_allocated=("total", "max"),
                                      allocated=("alloc", "sum"),
                                      freed=("free", "sum")).reset_index()
    devices.insert(2, "base", devices["device"].map(base).fillna(0).astype(np.int64))
    if wall_start is None or wall_end is None:
        wall_start = np.array([np.iinfo(np.int64).min])
        wall_end = np.array([np.iinfo(np.int64).max])
    ranges = phase_ranges(trace, wall_start, wall_end)
    f["phase"] = assign_phases(rows, ranges) if len(ranges) else NO_PHASE
    phases = f.groupby(["device", "phase"], sort=False).agg(
        events=("alloc", "size"), allocated=("alloc", "sum"), freed=("free", "sum")
    ).reset_index()
    if not base:
        notes.append("The trace does not give the allocator's totals: peaks count from "
                     "the first event.")
    return Memory(devices, phases, series, bench, notes)


def _compute(i: Inputs, s: Summary) -> Memory | None:
    """analyze's Memory section (None unless made ``with_efficiency``: ranks skip it)."""
    return memory(i.trace, i.ws, i.we) if i.with_efficiency else None


def _json(s: Summary, top: int) -> dict[str, Any]:
    return {"memory": s.memory.to_dict()} if s.memory else {}


SECTION = Section(_json, _compute)
