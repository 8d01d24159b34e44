"""Build tiny traces by hand: rows in, ``Trace`` out through the real normalize step."""

from __future__ import annotations

import pandas as pd

from traceviz.notebook_api import TraceAnalysis
from traceviz.parsers.normalize import finish
from traceviz.trace import Trace

HOST = dict(pid=1, tid=1, device=-1, stream=-1)


def row(kind: str, name: str, ts: int, dur: int, corr: int = -1, step: int = -1,
        device: int = 0, stream: int = 7, pid: int = 1, tid: int = 1) -> dict:
    on_device = kind in ("kernel", "memcpy", "memset")
    return {
        "kind": kind, "name": name, "ts_ns": ts, "dur_ns": dur,
        "pid": -1 if on_device else pid, "tid": -1 if on_device else tid,
        "device": device if on_device else -1, "stream": stream if on_device else -1,
        "correlation": corr, "step": step, "bytes": -1,
    }


def trace(*rows: dict) -> TraceAnalysis:
    """A finished trace of ``rows``, with the notebook API (``t.kernels()``...)."""
    return TraceAnalysis.of(finish(pd.DataFrame(list(rows)), {"source_format": "handmade"}))


def step_trace(kernels: list[tuple[str, int]], amp: str | None = None) -> Trace:
    """One 1000 ns step holding ``kernels`` (name, ns) back to back, with the metadata of a
    fine_torch run (``amp`` its --amp): a run for compare/amp tests."""
    rows = [row("step", "ProfilerStep#1", 0, 1000, step=1)]
    t0 = 0
    for name, dur in kernels:
        rows.append(row("kernel", name, t0, dur))
        t0 += dur
    t = trace(*rows)
    t.meta.update({"model": "fine_torch", "workload": {"batch": 1}, "amp": amp,
                   "device_kind": "cuda"})
    return t
