"""Build tiny traces by hand: rows in, ``Trace`` out through the real normalize step."""

from __future__ import annotations

import pandas as pd

from traceviz.normalize import finish
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


def trace(*rows: dict) -> Trace:
    return finish(pd.DataFrame(list(rows)), {"source_format": "handmade"})
