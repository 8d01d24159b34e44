"""What bounds a step, computed straight from a raw trace, independently of traceviz.

The diagnosis test bed's expectations: per trace, the step windows, the device's busy
time, the input pipeline and the device idle inside it, launches and kernels,
communication and how much of it is exposed, softmax kernels, each window's budget
(start-up, busy, input, queued, host: ``tests/diagnosis_startup.py``) and the host wait by
cause; and from those, from first principles, the verdicts ``advise``'s ``bound.by`` may
give (``expected_bound``) and, for a host verdict, its cause (``expected_cause``). The
events come from ``tests/diagnosis_events.py`` and ``tests/diagnosis_formats.py`` (no
traceviz import in any).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace
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
    per_window,
    read,
    subtract,
    union,
)
from tests.diagnosis_startup import BUDGET, CAUSES, GROUPS, budget, startup_of, window_of

# Thresholds of ``expected_bound``, as shares of the step windows' length.
# The input pipeline is the main cause when the device idles inside it for at least a tenth
# of the step: below that, more loader workers or prefetching win less than the step-to-step
# spread of a typical training loop, and launch or kernel remedies matter as much.
INPUT_IDLE_MIN = 0.10
# Communication is the main cause when collectives not hidden behind computation take a
# quarter of the step: then overlapping them (bucketing, async collectives) is the largest
# single saving; below that the computation around them dominates.
COMM_EXPOSED_MIN = 0.25
# Start-up bounds a trace without steps when what its windows hold besides start-up is
# under a quarter of the windows with the start-up recorded before them: too little steady
# work to judge (a cold forward, a program's start); with more, the steady part is what a
# user repeats, and its verdict is the useful one (start-up is shown apart).
STEADY_MIN = 0.25
# A step window is cold (a warm-up step, not the steady state) when start-up takes a tenth
# of it: the steady verdict is then drawn from the other steps alone.
COLD_MIN = 0.10
# The host bounds the step when the device waits for it a quarter of the step (start-up
# taken out): host-side remedies (graphs, fewer launches) then win at least that much.
HOST_MIN = 0.25
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
    and the rest, the host's (``host_idle_ns``: Python, the framework, launch calls).

    The budget (``tests/diagnosis_startup.py``) splits the same windows with start-up
    first: ``parts`` holds, per window, its length (``window``), each ``BUDGET`` part,
    its exposed communication (``comm_exposed``) and the host wait by ``CAUSES``
    (``wait_<cause>``); ``totals`` the same summed over every device and window (what
    ``analyze``'s ``host_wait_split`` sums)."""
    windows: Intervals  # step ranges, else the device's first launch to its last row's end
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
    parts: dict[str, np.ndarray] = field(default_factory=dict)  # per window, see above
    before_ns: int = 0  # start-up calls before the first window, from the first host event
    startup_parts: dict[str, int] = field(default_factory=dict)  # start-up calls by part
    totals: dict[str, int] = field(default_factory=dict)  # every device's windows, summed
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

    def part(self, name: str, windows: np.ndarray | None = None) -> int:
        """A budget part (or ``wait_<cause>``) over the windows (``windows``: a mask)."""
        v = self.parts.get(name, np.zeros(0, np.int64))
        return int(v.sum() if windows is None else v[windows].sum())

    @property
    def startup_share(self) -> float:
        """Start-up over the windows and before them, of the windows and that time."""
        whole = self.part("window") + self.before_ns
        return (self.part("startup") + self.before_ns) / whole if whole else 0.0

    def cold(self, at: float = COLD_MIN) -> np.ndarray:
        """Which step windows are cold: start-up ``at`` of the window or more."""
        if not self.steps:
            return np.zeros(len(self.parts.get("window", ())), bool)
        w = self.parts["window"]
        return self.parts["startup"] >= at * np.maximum(w, 1)

    def causes(self, windows: np.ndarray | None = None) -> dict[str, int]:
        """The host wait (outside start-up and input) by cause group (``GROUPS``)."""
        return {g: sum(self.part(f"wait_{c}", windows) for c in members)
                for g, members in GROUPS.items()}


FIGURES = ("window_ns", "busy_ns", "input_ns", "input_idle_ns", "queued_idle_ns",
           "longest_gap_ns", "comm_ns", "comm_exposed_ns")


def _device(ev: Events, on: np.ndarray, windows: Intervals, comm: np.ndarray) -> dict:
    """One device's figures inside ``windows`` (``on``: its rows)."""
    work = union(ev.dev_start[on], ev.dev_end[on])
    inside = intersect(work, windows)
    idle = subtract(windows, work)
    inputs = intersect(ev.inputs, windows)
    waits = on & (ev.dev_launched >= 0)
    queued = intersect(union(ev.dev_launched[waits], ev.dev_start[waits]), idle)
    c = intersect(union(ev.dev_start[on & comm], ev.dev_end[on & comm]), windows)
    other = on & ev.dev_kernel & ~comm
    exposed = subtract(c, union(ev.dev_start[other], ev.dev_end[other]))
    return dict(
        window_ns=length(windows), busy_ns=length(inside), input_ns=length(inputs),
        input_idle_ns=length(intersect(inputs, idle)),
        queued_idle_ns=minus(queued, inputs),
        longest_gap_ns=int((idle[:, 1] - idle[:, 0]).max()) if len(idle) else 0,
        comm_ns=length(c), comm_exposed_ns=length(exposed),
        exposed=per_window(exposed, windows))


def facts_of(ev: Events) -> Facts:
    names = ev.dev_name.astype(str) if len(ev.dev_name) else np.array([], str)
    comm = ev.dev_kernel & np.array([bool(COMM.search(n)) for n in names], bool)
    softmax = ev.dev_kernel & np.array([bool(SOFTMAX.search(n)) for n in names], bool)
    devices = np.unique(ev.dev_id)
    start = startup_of(ev)
    per = {}
    for d in devices:
        on = ev.dev_id == d
        if ev.device_steps:  # each device has its own steps (TF's "Steps" line)
            w = ev.device_steps.get(int(d))
            if w is None:
                continue
        else:
            w = ev.steps if len(ev.steps) else window_of(ev, on)
        per[d] = (w, _device(ev, on, w, comm), budget(ev, on, w, start))
    if not per:  # no device work: the host's span, nothing on a device to split
        w = union([ev.host_span[0]], [ev.host_span[1]]) if ev.host_span else union([], [])
        per[-1] = (w, dict.fromkeys(FIGURES, 0) | {"window_ns": length(w),
                                                   "exposed": np.zeros(len(w), np.int64)},
                   None)
    # each device with its own steps: the devices' figures add up; else the busiest device
    chosen = list(per) if ev.device_steps else [max(per, key=lambda d: per[d][1]["busy_ns"])]
    figures = {k: sum(per[d][1][k] for d in chosen) for k in FIGURES}
    figures["longest_gap_ns"] = max(per[d][1]["longest_gap_ns"] for d in chosen)
    windows = union(*np.concatenate([per[d][0] for d in chosen]).T)
    parts = {"window": np.concatenate([per[d][0][:, 1] - per[d][0][:, 0] for d in chosen]),
             "comm_exposed": np.concatenate([per[d][1]["exposed"] for d in chosen])}
    budgets = [b for _, _, b in per.values() if b is not None]
    mine = [per[d][2] for d in chosen if per[d][2] is not None]
    for k in BUDGET:
        parts[k] = np.concatenate([b.parts[k] for b in mine]) if mine else 0 * parts["window"]
    for k in CAUSES:
        parts[f"wait_{k}"] = np.concatenate([b.causes[k] for b in mine]) if mine \
            else 0 * parts["window"]
    totals = {f"{k}_ns": int(sum(b.parts[k].sum() for b in budgets)) for k in BUDGET}
    totals |= {k: int(sum(b.causes[k].sum() for b in budgets)) for k in CAUSES}
    totals["host_wait_ns"] = sum(totals[k] for k in CAUSES)
    totals["before_ns"] = sum(b.before_ns for b in budgets)
    dur = ev.dev_end - ev.dev_start
    return Facts(
        windows=windows, steps=sum(len(per[d][0]) for d in chosen) if ev.device_steps
        else len(ev.steps), devices=len(devices), **figures,
        launches=ev.launches, graph_launches=ev.graph_launches,
        kernels=int(ev.dev_kernel.sum()), kernel_ns=int(dur[ev.dev_kernel].sum()),
        softmax_ns=int(dur[softmax].sum()), softmax_seq=ev.softmax_seq, parts=parts,
        before_ns=sum(b.before_ns for b in mine), startup_parts=start.parts, totals=totals)


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


def _first(tests, otherwise: set[str]) -> set[str]:
    """The verdicts of the first test past its threshold, with every borderline test's
    before it (a test within ``BORDER`` of its threshold adds its verdicts and goes on)."""
    out: set[str] = set()
    for verdicts, margin in tests:
        if margin >= -BORDER:
            out |= verdicts
            if margin > BORDER:
                return out
    return out | otherwise


def steady_bound(f: Facts, windows: np.ndarray | None = None) -> set[str]:
    """The steady verdict over ``windows`` (a mask; all: None), start-up taken out:

    - "input": the device idles inside input calls ``INPUT_IDLE_MIN`` of the span and at
      least as long as it waits for the host;
    - "communication": exposed communication ``COMM_EXPOSED_MIN`` of the span and more
      than the host's wait (a device verdict accepted too: collectives run on the device,
      and a slow peer's wait shows as a long collective);
    - "host": the host's wait ``HOST_MIN`` of the span (for a run folder, the timed step
      leaves the host that room too: the profiler stretches host work, not kernels);
    - "device" otherwise."""
    span = f.part("window", windows) - f.part("startup", windows)
    if span <= 0:
        return set()
    inp, host = f.part("input", windows) / span, f.part("host", windows) / span
    comm = f.part("comm_exposed", windows) / span
    timed = f.timed_busy_share
    room = 1.0 if timed is None else 1.0 - timed
    return _first((({"input"}, min(inp - INPUT_IDLE_MIN, inp - host)),
                   ({"communication", "device"}, min(comm - COMM_EXPOSED_MIN, comm - host)),
                   ({"host"}, min(host - HOST_MIN, room - HOST_MIN))), {"device"})


def _steady_steps(f: Facts, cold: np.ndarray) -> np.ndarray:
    """The step windows a steady verdict can be drawn from: not cold, and the device ran
    work in them (an empty step shows no pace)."""
    return ~cold & (f.parts.get("busy", np.zeros(len(cold), np.int64)) > 0)


def _bound(f: Facts, cold: np.ndarray) -> set[str]:
    """The verdicts with ``cold`` the cold step windows."""
    if cold.any():
        steady = _steady_steps(f, cold)
        return steady_bound(f, steady) if steady.any() else {"startup"}
    held = f.part("window") + f.before_ns
    steady_ns = f.part("window") - f.part("startup")
    if not held or not (f.part("startup") + f.before_ns):
        return steady_bound(f)
    margin = STEADY_MIN - steady_ns / held
    return _first((({"startup"}, margin),), steady_bound(f))


def expected_bound(f: Facts) -> frozenset[str]:
    """The verdicts ``advise``'s ``bound.by`` may give, from first principles.

    Launches without kernel records: the device time is unknown. No device work at all
    (a CPU trace, NVTX ranges only): nothing on a device to judge; the host is all there
    is. With steps of which some are cold (``COLD_MIN``): the steady verdict over the
    other steps that ran device work, "startup" where there are none. Otherwise "startup"
    when what the windows hold besides start-up is under ``STEADY_MIN`` of the windows and
    the start-up recorded before them, else the steady verdict (``steady_bound``). A window
    within ``BORDER`` of ``COLD_MIN`` is taken both ways."""
    if f.kernels == 0:
        return frozenset({"unknown"} if f.launches else {"unknown", "host"})
    out: set[str] = set()
    for at in (COLD_MIN - BORDER, COLD_MIN, COLD_MIN + BORDER):
        out |= _bound(f, f.cold(at))
    return frozenset(out)


def verdict_windows(f: Facts) -> np.ndarray | None:
    """The windows the steady verdict is drawn from (a mask): the steady steps where some
    steps are cold, else every window (None)."""
    cold = f.cold()
    steady = _steady_steps(f, cold)
    return steady if cold.any() and steady.any() else None


def expected_cause(f: Facts) -> frozenset[str]:
    """The causes ``bound.cause`` may give for a host verdict: the largest group of the
    host wait (over the windows the verdict is drawn from), and any group within
    ``BORDER`` of the host wait of it."""
    causes = f.causes(verdict_windows(f))
    wait = sum(causes.values())
    if not wait:
        return frozenset()
    top = max(causes.values())
    return frozenset(g for g, ns in causes.items() if ns >= top - BORDER * wait)
