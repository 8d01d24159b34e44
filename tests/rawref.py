"""Reference figures computed straight from a raw Kineto JSON, independently of traceviz.

Plain ``json`` + ``Decimal`` and Python loops: a different code path from the parser,
so agreement means something.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

LAUNCH = {
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
    "cudaLaunchCooperativeKernel", "cudaGraphLaunch", "hipLaunchKernel", "hipExtLaunchKernel",
    "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
    "cudaMemcpy", "cudaMemset", "hipMemcpyAsync", "hipMemcpyWithStream", "hipMemsetAsync",
    "hipMemcpy", "cudaMemcpy2DAsync", "cudaMemcpyPeerAsync",
}
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def load(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def ns(v) -> int:
    return int((Decimal(v) * 1000).to_integral_value())


def union(intervals: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


class Reference:
    def __init__(self, path: Path):
        self.events = load(path)
        self.kernels = [e for e in self.events if e.get("cat") == "kernel"]
        self.device = [e for e in self.events if e.get("cat") in DEVICE_CATS]
        self.launches = [e for e in self.events
                         if e.get("cat") in ("cuda_runtime", "cuda_driver")
                         and e["name"] in LAUNCH]

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    @property
    def kernel_total_ns(self) -> int:
        return sum(ns(e["dur"]) for e in self.kernels)

    @property
    def matched_launches(self) -> int:
        device_corr = {e["args"].get("correlation") for e in self.device}
        return sum(1 for e in self.launches if e["args"].get("correlation") in device_corr)

    def busy_ns(self) -> int:
        by_device: dict[int, list] = {}
        for e in self.device:
            dev = e["args"].get("device", e["pid"])
            s = ns(e["ts"])
            by_device.setdefault(dev, []).append((s, s + ns(e["dur"])))
        return sum(union(v) for v in by_device.values())

    def launch_of(self) -> dict:
        return {e["args"]["correlation"]: e for e in self.launches}

    def step_busy_span(self) -> tuple[int, int]:
        """Step-scoped busy and span of a single-device trace (DESIGN.md definitions)."""
        steps = sorted(
            (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), int(e["name"].split("#")[1]))
            for e in self.events
            if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
        )
        launch = self.launch_of()

        def step_of(t: int) -> int | None:
            for s, e, n in steps:
                if s <= t < e:
                    return n
            return None

        rows: dict[int, list] = {n: [] for _, _, n in steps}
        for e in self.device:
            la = launch.get(e["args"].get("correlation"))
            n = step_of(ns(la["ts"])) if la is not None else step_of(ns(e["ts"]))
            if n is not None:
                s = ns(e["ts"])
                rows[n].append((s, s + ns(e["dur"])))
        busy = span = 0
        for s, e, n in steps:
            end = max([e] + [b for _, b in rows[n]])
            busy += union(rows[n])
            span += end - s
        return busy, span
