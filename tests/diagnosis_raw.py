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
    """What bounds a trace's steps, from its raw events. Times are of one device (the
    busiest) inside the step windows, or summed over devices where each has its own steps
    (XSpace ``Steps`` lines); shares are of ``window_ns``. The window's time splits into
    the device busy and its idle: inside input ranges (``input_idle_ns``), with work
    launched and waiting (``queued_idle_ns``: a stream wait, a collective, a busy queue)
    and the rest, the host's (``host_idle_ns``: Python, the framework, launch calls)."""
    windows: Intervals  # ProfilerStep#N host ranges, else the span of device work
    steps: int  # step ranges (0: the window is the span of device work)
    window_ns: int
    devices: int  # devices with work
    busy_ns: int  # union of device work (kernels, copies, sets) inside the windows
    input_ns: int  # input-pipeline host ranges (union) inside the windows
    input_idle_ns: int  # the device idle inside those
    queued_idle_ns: int  # the device idle outside them while launched work waits
    longest_gap_ns: int  # the device's longest idle stretch inside a window
    launches: int  # kernel and graph launch calls
    graph_launches: int
    kernels: int  # kernel records (all, windows or not)
    kernel_ns: int  # their summed durations
    comm_ns: int  # communication kernels inside the windows (union)
    comm_exposed_ns: int  # of which no non-communication kernel runs on that device
    softmax_ns: int  # softmax kernels' summed durations (all)
    softmax_seq: int  # S of the largest softmax over [..., S, S] (0: none recorded)
    # a run folder's bench.json: the unprofiled step (median) and the profiled steps
    timed_step_ns: int | None = None
    profiled_steps: int | None = None

    def share(self, ns: int) -> float:
        return ns / self.window_ns if self.window_ns else 0.0

    @property
    def busy_share(self) -> float:
        return self.share(self.busy_ns)

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
        return self.share(self.input_ns)

    @property
    def input_idle_share(self) -> float:
        return self.share(self.input_idle_ns)

    @property
    def host_idle_ns(self) -> int:
        """The device idle with nothing launched, outside input ranges: the host's."""
        return self.window_ns - self.busy_ns - self.input_idle_ns - self.queued_idle_ns

    @property
    def comm_exposed_share(self) -> float:
        return self.share(self.comm_exposed_ns)

    @property
    def softmax_share(self) -> float:
        return self.softmax_ns / self.kernel_ns if self.kernel_ns else 0.0


FIGURES = ("window_ns", "busy_ns", "input_ns", "input_idle_ns", "queued_idle_ns",
           "longest_gap_ns", "comm_ns", "comm_exposed_ns")


def _device(ev: Events, on: np.ndarray, windows: Intervals, comm: np.ndarray) -> dict:
    """One device's figures inside ``windows`` (``on``: its rows)."""
    work = union(ev.dev_start[on], ev.dev_end[on])
    inside = intersect(work, windows)
    idle = _gaps(work, windows)
    inputs = intersect(ev.inputs, windows)
    waits = on & (ev.dev_launched >= 0)
    queued = intersect(union(ev.dev_launched[waits], ev.dev_start[waits]), idle)
    c = intersect(union(ev.dev_start[on & comm], ev.dev_end[on & comm]), windows)
    other = on & ev.dev_kernel & ~comm
    return dict(
        window_ns=length(windows), busy_ns=length(inside), input_ns=length(inputs),
        input_idle_ns=length(intersect(inputs, idle)),
        queued_idle_ns=minus(queued, inputs),
        longest_gap_ns=int((idle[:, 1] - idle[:, 0]).max()) if len(idle) else 0,
        comm_ns=length(c), comm_exposed_ns=minus(c, union(ev.dev_start[other], ev.dev_end[other])))


def _gaps(work: Intervals, windows: Intervals) -> Intervals:
    """The parts of ``windows`` no ``work`` covers."""
    edges = np.r_[np.iinfo(np.int64).min, work.ravel(), np.iinfo(np.int64).max]
    return intersect(union(edges[0::2], edges[1::2]), windows)


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
    devices = np.unique(ev.dev_id)
    if ev.device_steps:
        # each device has its own steps (TF's "Steps" line): the devices' figures add up
        per = [_device(ev, ev.dev_id == d, w, comm) for d, w in ev.device_steps.items()]
        figures = {k: sum(p[k] for p in per) for k in FIGURES}
        figures["longest_gap_ns"] = max(p["longest_gap_ns"] for p in per)
        windows = union(*np.concatenate(list(ev.device_steps.values())).T)
        steps = sum(len(w) for w in ev.device_steps.values())
    else:  # one set of windows: the busiest device
        per = [_device(ev, ev.dev_id == d, windows, comm) for d in devices]
        figures = max(per, key=lambda p: p["busy_ns"], default=None) or dict.fromkeys(FIGURES, 0)
        figures["window_ns"], steps = length(windows), len(ev.steps)
    dur = ev.dev_end - ev.dev_start
    return Facts(
        windows=windows, steps=steps, devices=len(devices), **figures,
        launches=ev.launches, graph_launches=ev.graph_launches,
        kernels=int(ev.dev_kernel.sum()), kernel_ns=int(dur[ev.dev_kernel].sum()),
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
    (a CPU trace, NVTX ranges only): nothing on a device to judge; the host is all there
    is. Otherwise the step is bound by the biggest cause over its threshold, tried in
    this order:

    - "input": the device idles inside the input pipeline ``INPUT_IDLE_MIN`` of the step
      and at least as long as it idles for the host;
    - "communication": exposed communication ``COMM_EXPOSED_MIN`` of the step and at
      least the host's idle (a device verdict accepted too: collectives run on the
      device, and a slow peer's wait shows as a long collective);
    - "device": the device busy, or idle with launched work waiting (a stream wait, a
      collective: the host is not what it waits for), ``DEVICE_BUSY_MIN`` of the step;
      for a run folder the work per step over the timed step counts too (the profiler
      stretches host work, not kernels);
    - "host" otherwise.

    A test within ``BORDER`` of its threshold adds its verdicts and goes on to the next."""
    if f.kernels == 0:
        return frozenset({"unknown"} if f.launches else {"unknown", "host"})
    host = f.share(f.host_idle_ns)
    device = f.share(f.busy_ns + f.queued_idle_ns)
    tests = (
        ({"input"}, min(f.input_idle_share - INPUT_IDLE_MIN, f.input_idle_share - host)),
        ({"communication", "device"}, min(f.comm_exposed_share - COMM_EXPOSED_MIN,
                                          f.comm_exposed_share - host)),
        ({"device"}, max(device, f.timed_busy_share or 0.0) - DEVICE_BUSY_MIN),
    )
    out: set[str] = set()
    for verdicts, margin in tests:
        if margin >= -BORDER:
            out |= verdicts
            if margin > BORDER:
                return frozenset(out)
    return frozenset(out | {"host"})
