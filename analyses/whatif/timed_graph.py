"""What-if scenarios in timed time: the replay graph with its host work slowed as much as
the profiler slowed it taken back out, then each scenario replayed on that graph.

The profiler's cost lands on the host (every op and API call is recorded): device work
runs as fast with it as without. So the graph of the unprofiled run is the recorded graph
with every host duration and host gap scaled by one factor ``f``, calibrated so that the
scaled graph's replay lasts the timed step (a few secant steps from the first guess of
``analyses/timed.py``). A scenario's timed saving is the scaled identity replay less the
scaled scenario's replay; the timed prediction is the timed step less that saving. Being
a replay, it never falls below the device work the scenario keeps, and a scenario that
speeds up device work saves nothing where the host still sets the pace. A CPU trace's ops
are its host work, slowed by the profiler as well: there the factor scales every op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceviz.analyses.replay.graph import ReplayGraph
from traceviz.analyses.replay.measure import Windows
from traceviz.analyses.timed import TimedStep

CALIBRATION_STEPS = 3
CALIBRATED_WITHIN = 0.01  # of the timed step


@dataclass(frozen=True)
class TimedGraph:
    """The recorded graph with its host work scaled to the timed step."""

    graph: ReplayGraph
    factor: float            # host durations and gaps x factor
    identity: Windows        # its replay as recorded
    steps: int

    def per_step(self, w: Windows) -> float:
        return w.span_ns / max(self.steps * max(w.devices, 1), 1)


def scale_host(g: ReplayGraph, f: float) -> ReplayGraph:
    """Every host call's own time, the host time between calls, a synchronizing call's
    tail and the lag behind another thread, times ``f``."""
    def sc(a: np.ndarray) -> np.ndarray:
        return np.round(a * f).astype(np.int64)

    return g.with_changes(h_dur=sc(g.h_dur), h_gap=sc(g.h_gap), h_tail=sc(g.h_tail),
                          h_after_lat=sc(g.h_after_lat))


def timed_graph(g: ReplayGraph, t: TimedStep | None, steps: int, replay: Callable
                ) -> TimedGraph | None:
    """``g`` scaled so that its replay lasts the timed step (``replay``: graph ->
    ``Windows``); None where the run has no timed step or no steps."""
    if t is None or not t.known or not steps or t.timed_ns is None:
        return None
    target = t.timed_ns
    # a CPU trace has no device rows: its ops are the host work, and the profiler slowed
    # them too, so all of the step scales (no device floor)
    cpu = bool(g.trace.is_cpu)
    floor = 0.0 if cpu else t.device_ns
    f: float | None = target / t.profiled_ns if cpu and t.profiled_ns > 0 else \
        t.host_scale if t.host_scale is not None else 1.0
    tried: list[tuple[float, float]] = []
    best = None
    for _ in range(CALIBRATION_STEPS + 1):
        assert f is not None
        w = replay(scale_host(g, f))
        span = w.span_ns / max(steps * max(w.devices, 1), 1)
        tried.append((f, span))
        if best is None or abs(span - target) < abs(best[1] - target):
            best = (f, span, w)
        if abs(span - target) <= CALIBRATED_WITHIN * target:
            break
        f = _next_factor(tried, target, floor)
        if f is None:
            break
    assert best is not None
    return TimedGraph(scale_host(g, best[0]), best[0], best[2], steps)


def _next_factor(tried: list[tuple[float, float]], target: float, device: float
                 ) -> float | None:
    """The secant step through the last two tries (the first: the host part of the
    step taken as proportional to the factor)."""
    f1, s1 = tried[-1]
    if len(tried) == 1:
        if s1 <= device or f1 <= 0:
            return None
        return max(0.0, f1 * (target - device) / (s1 - device))
    f0, s0 = tried[-2]
    if s1 == s0:
        return None
    return max(0.0, f1 + (target - s1) * (f1 - f0) / (s1 - s0))


def in_timed(tg: TimedGraph | None, scenario: Windows | None, t: TimedStep | None
             ) -> tuple[float | None, float | None]:
    """(timed step, timed saving) per step of a scenario replayed on the scaled graph."""
    if tg is None or scenario is None or t is None or t.timed_ns is None:
        return None, None
    saving = tg.per_step(tg.identity) - tg.per_step(scenario)
    busy = scenario.busy_ns / max(tg.steps * max(scenario.devices, 1), 1)
    step = max(t.timed_ns - saving, busy)
    return step, t.timed_ns - step


def timed_model(trace: Any, g: ReplayGraph, measured: Windows, replay: Callable,
                windows: dict | None = None) -> tuple[TimedStep | None, TimedGraph | None]:
    """The run's profiled and timed step (from its bench timings; ``windows``: the
    trace's analysis windows) and the graph scaled to the timed step."""
    from traceviz.analyses.timed import timed_step
    from traceviz.analyses.timings import run_timings

    t = timed_step(run_timings(trace, windows), measured.span_ns, measured.busy_ns,
                   len(measured.per_step), measured.devices)
    return t, timed_graph(g, t, len(measured.per_step), replay)


def scenario_in_timed(tg: TimedGraph | None, changed: ReplayGraph, t: TimedStep | None,
                      replay: Callable) -> tuple[float | None, float | None]:
    """A scenario applied to the recorded graph, then the profiler's host cost taken out of
    all its host work (a graph launch's learnt cost was measured profiled too), replayed:
    its (timed step, timed saving) per step."""
    if tg is None:
        return None, None
    return in_timed(tg, replay(scale_host(changed, tg.factor)), t)
