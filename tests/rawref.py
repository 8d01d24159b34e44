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


FLOATS = {"float", "double", "c10::Half", "c10::BFloat16"}


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

    def cast_kernels(self) -> list[dict]:
        """Copy kernels named ...WithCast, but not those launched by an aten::copy_ whose
        recorded dtypes keep the floating-point format (an integer copy) or whose source
        is a 0-dim tensor (a scalar's conversion): the launch
        found by correlation id, its op by walking the launching thread's cpu_ops."""
        launch = self.launch_of()
        ops: dict = {}
        for e in self.events:
            if e.get("cat") == "cpu_op":
                ops.setdefault((e["pid"], e["tid"]), []).append(e)

        def keeps_format(k: dict) -> bool:
            call = launch.get(k["args"].get("correlation"))
            if call is None:
                return False
            t = ns(call["ts"])
            around = [o for o in ops.get((call["pid"], call["tid"]), [])
                      if ns(o["ts"]) <= t < ns(o["ts"]) + ns(o["dur"])]
            op = max(around, key=lambda o: ns(o["ts"])) if around else None
            types = (op or {}).get("args", {}).get("Input type") or []
            dims = (op or {}).get("args", {}).get("Input Dims") or []
            if not op or op["name"] != "aten::copy_" or len(types) < 2:
                return False
            if len(dims) > 1 and dims[1] == []:  # a 0-dim source: a scalar's conversion
                return True
            return types[0] == types[1] or not (types[0] in FLOATS and types[1] in FLOATS)

        return [e for e in self.kernels if "copy_kernel" in e["name"]
                and "WithCast" in e["name"] and not keeps_format(e)]

    def steps(self) -> list[tuple[int, int, int]]:
        """(start, end, number) of the host ProfilerStep#N markers, by start."""
        return sorted(
            (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), int(e["name"].split("#")[1]))
            for e in self.events
            if e.get("cat", "").lower() in ("user_annotation", "operator", "cpu_op")
            and e["name"].startswith("ProfilerStep#"))

    def windows(self) -> dict:
        """Per device: the analysis windows [(start, end)] (DESIGN.md "Windows"): a step
        runs to the next step's start; the last to the later of its marker's end and the
        end of the device rows its step launched; without steps, first launch (or first
        row) to last row end."""
        steps = self.steps()
        rows = self.device_rows()
        out = {}
        for dev, items in rows.items():
            if not steps:
                first = min(min(s for s, _, _, _ in items),
                            min((la for _, _, la, _ in items if la is not None),
                                default=10 ** 30))
                out[dev] = [(first, max(e for _, e, _, _ in items))]
                continue
            starts = [s for s, _, _ in steps]
            last_start, last_end, last_n = steps[-1]
            tail = [e for s, e, la, _ in items
                    if self.step_at(la if la is not None else s, steps) == last_n]
            out[dev] = [(starts[i], starts[i + 1]) for i in range(len(starts) - 1)]
            out[dev].append((last_start, max([last_end] + tail)))
        return out

    @staticmethod
    def step_at(t: int, steps) -> int | None:
        for s, e, n in steps:
            if s <= t < e:
                return n
        return None

    def device_rows(self) -> dict:
        """Per device: (start, end, launch start or None, launch end or None, stream)."""
        launch = self.launch_of()
        out: dict = {}
        for e in self.device:
            la = launch.get(e["args"].get("correlation"))
            s = ns(e["ts"])
            ls = ns(la["ts"]) if la is not None else None
            le = ls + ns(la["dur"]) if la is not None else None
            out.setdefault(e["args"].get("device", e["pid"]), []).append(
                (s, s + ns(e["dur"]), ls, (le, e["args"].get("stream", e["tid"]))))
        return out

    def busy_split(self) -> dict:
        """Per device: (span, busy, host_wait, queued) over its windows."""
        windows = self.windows()
        return {dev: split_by_sweep(items, windows[dev])
                for dev, items in self.device_rows().items()}


def split_by_sweep(items: list, windows: list[tuple[int, int]]) -> tuple[int, int, int, int]:
    """(span, busy, host_wait, queued) of one device's rows over its windows, in plain
    Python: busy = some row runs; queued = none runs but a launched row is pending (from
    its launch call's end to its start; a row without a launch that runs before its
    stream's first launched row, from the trace start). ``items``: (start, end, launch
    start or None, (launch end or None, stream))."""
    first_launched: dict = {}
    for s, _, ls, (_, stream) in items:
        if ls is not None:
            first_launched[stream] = min(first_launched.get(stream, s), s)
    busy_iv = [(s, e) for s, e, _, _ in items]
    pend_iv = []
    for s, _, ls, (le, stream) in items:
        if ls is not None:
            pend_iv.append((min(le, s), s))
        elif s < first_launched.get(stream, 10 ** 30):
            pend_iv.append((-(10 ** 30), s))
    span = busy = occupied = 0
    for ws, we in windows:
        span += we - ws
        clip = [(max(a, ws), min(b, we)) for a, b in busy_iv if b > ws and a < we]
        clip_p = [(max(a, ws), min(b, we)) for a, b in pend_iv if b > ws and a < we]
        busy += union(clip)
        occupied += union(clip + clip_p)
    return span, busy, span - occupied, occupied - busy
