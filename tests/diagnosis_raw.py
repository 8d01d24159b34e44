"""What bounds a step, computed straight from a raw trace, independently of traceviz.

The diagnosis test bed's expectations: per trace, the step windows, the device's busy
time, the input pipeline and the device idle inside it, launches and kernels,
communication and how much of it is exposed, softmax kernels; and from those, from first
principles, the verdicts ``advise``'s ``bound.by`` may give (``expected_bound``). The
events come from ``tests/diagnosis_events.py`` (no traceviz import in either).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tests.diagnosis_events import (
    COMM,
    SOFTMAX,
    Events,
    Intervals,
    intersect,
    length,
    minus,
    read,
    union,
)

# Thresholds of ``expected_bound``, as shares of the step windows' length.
# The input pipeline is the main cause when the device idles inside it for at least a tenth
# of the step: below that, more loader workers or prefetching win less than the step-to-step
# spread of a typical training loop, and launch or kernel remedies matter as much.
INPUT_IDLE_MIN = 0.10
# Communication is the main cause when collectives not hidden behind computation take a
# quarter of the step: then overlapping them (bucketing, async collectives) is the largest
# single saving; below that the computation around them dominates.
COMM_EXPOSED_MIN = 0.25
# The device bounds the step when its busiest GPU works 80 % of the step: host-side
# remedies (graphs, fewer launches) can then win at most the remaining fifth.
DEVICE_BUSY_MIN = 0.80
# A figure within this many points of a threshold is borderline: the test accepts the
# verdicts on both sides (windows drawn slightly differently move a share by a few points).
BORDER = 0.05


# ---------------------------------------------------------------- the facts of a trace


@dataclass(frozen=True)
class Facts:
    """What bounds a trace's steps, from its raw events. Shares are of ``window_ns``."""
    windows: Intervals  # ProfilerStep#N host ranges, else the span of device work
    steps: int  # ProfilerStep ranges (0: the window is the span of device work)
    window_ns: int
    devices: int  # devices with work
    busy_ns: int  # union of device work inside the windows, busiest device
    input_ns: int  # input-pipeline host ranges (union) inside the windows
    input_idle_ns: int  # the busiest device idle inside those
    launches: int  # kernel and graph launch calls
    graph_launches: int
    kernels: int  # kernel records (all, windows or not)
    kernel_ns: int  # their summed durations
    comm_ns: int  # communication kernels inside the windows (union), busiest device
    comm_exposed_ns: int  # of which no non-communication kernel runs on that device
    softmax_ns: int  # softmax kernels' summed durations (all)
    softmax_seq: int  # S of the largest softmax over [..., S, S] (0: none recorded)
    # a run folder's bench.json: the unprofiled step (median) and the profiled steps
    timed_step_ns: int | None = None
    profiled_steps: int | None = None

    @property
    def busy_share(self) -> float:
        return self.busy_ns / self.window_ns if self.window_ns else 0.0

    @property
    def timed_busy_share(self) -> float | None:
        """The device's work per profiled step over the timed (unprofiled) step: the
        profiler stretches host work, not kernels, so this is how busy the device is
        when the run is not profiled."""
        if not self.timed_step_ns or not self.profiled_steps:
            return None
        return min(1.0, self.busy_ns / self.profiled_steps / self.timed_step_ns)

    @property
    def input_share(self) -> float:
        return self.input_ns / self.window_ns if self.window_ns else 0.0

    @property
    def input_idle_share(self) -> float:
        return self.input_idle_ns / self.window_ns if self.window_ns else 0.0

    @property
    def other_idle_ns(self) -> int:
        """Device idle outside the input ranges: what launches, syncs and the host cost."""
        return self.window_ns - self.busy_ns - self.input_idle_ns

    @property
    def comm_exposed_share(self) -> float:
        return self.comm_exposed_ns / self.window_ns if self.window_ns else 0.0

    @property
    def softmax_share(self) -> float:
        return self.softmax_ns / self.kernel_ns if self.kernel_ns else 0.0


def facts_of(ev: Events) -> Facts:
    if len(ev.steps):
        windows = ev.steps
    elif len(ev.dev_start):
        windows = union([ev.dev_start.min()], [ev.dev_end.max()])
    elif ev.host_span:
        windows = union([ev.host_span[0]], [ev.host_span[1]])
    else:
        windows = np.empty((0, 2), np.int64)
    names = ev.dev_name.astype(str) if len(ev.dev_name) else np.array([], str)
    comm = ev.dev_kernel & np.array([bool(COMM.search(n)) for n in names], bool)
    softmax = ev.dev_kernel & np.array([bool(SOFTMAX.search(n)) for n in names], bool)
    inputs = intersect(ev.inputs, windows)
    busy = comm_ns = exposed = 0
    busiest = np.empty((0, 2), np.int64)
    for d in np.unique(ev.dev_id):  # per device: a few devices, vectorized inside
        on = ev.dev_id == d
        work = intersect(union(ev.dev_start[on], ev.dev_end[on]), windows)
        if length(work) > busy or not len(busiest):
            busy, busiest = length(work), work
        c = intersect(union(ev.dev_start[on & comm], ev.dev_end[on & comm]), windows)
        other = on & ev.dev_kernel & ~comm
        compute = union(ev.dev_start[other], ev.dev_end[other])
        if minus(c, compute) > exposed:
            comm_ns, exposed = length(c), minus(c, compute)
    dur = ev.dev_end - ev.dev_start
    return Facts(
        windows=windows, steps=len(ev.steps), window_ns=length(windows),
        devices=len(np.unique(ev.dev_id)), busy_ns=busy, input_ns=length(inputs),
        input_idle_ns=minus(inputs, busiest), launches=ev.launches,
        graph_launches=ev.graph_launches, kernels=int(ev.dev_kernel.sum()),
        kernel_ns=int(dur[ev.dev_kernel].sum()), comm_ns=comm_ns, comm_exposed_ns=exposed,
        softmax_ns=int(dur[softmax].sum()), softmax_seq=ev.softmax_seq)


@functools.cache
def facts(path: Path) -> Facts:
    """The facts of one trace file, read once per process."""
    return facts_of(read(Path(path)))


RUN_TRACES = ("trace.pt.trace.json.gz", "vm.xplane.pb.gz")


def run_trace(folder: Path) -> Path:
    """The raw trace of a run folder (``traceviz capture``'s output)."""
    return next(folder / n for n in RUN_TRACES if (folder / n).is_file())


@functools.cache
def run_facts(folder: Path) -> Facts:
    """The facts of a run folder's trace with its ``bench.json``'s timed step."""
    bench = json.loads((Path(folder) / "bench.json").read_text())
    return replace(facts(run_trace(Path(folder))),
                   timed_step_ns=round(bench["time_per_batch_s"]["median"] * 1e9),
                   profiled_steps=int(bench["profiled_batches"]))


def expected_bound(f: Facts) -> frozenset[str]:
    """The verdicts ``advise``'s ``bound.by`` may give, from first principles.

    Launches without kernel records: the device time is unknown. No device work at all
    (a CPU trace, NVTX ranges only): nothing on a device to judge, the host is all there
    is. Otherwise, in order, the first that holds: the device idles inside the input
    pipeline for ``INPUT_IDLE_MIN`` of the step and at least as long as elsewhere ->
    "input"; exposed communication ``COMM_EXPOSED_MIN`` -> "communication" (a device
    verdict accepted too: the collectives run on the device); the busiest device busy
    ``DEVICE_BUSY_MIN`` (of the timed step where a run folder has one) -> "device"; else
    the host. A test within ``BORDER`` of its
    threshold adds its verdicts and goes on to the next."""
    if f.kernels == 0:
        return frozenset({"unknown"} if f.launches else {"unknown", "host"})
    w = f.window_ns
    tests = (
        ({"input"}, min(f.input_idle_share - INPUT_IDLE_MIN,
                        (f.input_idle_ns - f.other_idle_ns) / w)),
        ({"communication", "device"}, f.comm_exposed_share - COMM_EXPOSED_MIN),
        ({"device"}, (f.busy_share if f.timed_busy_share is None else f.timed_busy_share)
         - DEVICE_BUSY_MIN),
    )
    out: set[str] = set()
    for verdicts, margin in tests:
        if margin >= -BORDER:
            out |= verdicts
            if margin > BORDER:
                return frozenset(out)
    return frozenset(out | {"host"})
