"""What would an optimization buy: scenarios as transformations of the replay graph
(``analyses/replay/graph.py``), each replayed and measured over the same windows as the trace.

A scenario's saving is against the identity replay (the graph unchanged), so the
model's own error cancels; ``replay_error`` says how well the identity replay
reproduces the measured window time. Each scenario states its assumptions. The scenarios
are the rows of ``scenarios.py``; this module replays them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.critical_path.path import path_of
from traceviz.analyses.critical_path.removed import removed_from_path
from traceviz.analyses.replay.graph import ReplayGraph, Solution, build, solve
from traceviz.analyses.replay.measure import Windows, replayed_trace, window_time
from traceviz.analyses.replay.stream_waits import wait_calls
from traceviz.analyses.timed import TimedStep
from traceviz.analyses.whatif.given import Given
from traceviz.analyses.whatif.notes import cross_stream_caveat, path_check
from traceviz.analyses.whatif.scenarios import DEFAULT_SCENARIOS, SCENARIOS, parse_scenarios
from traceviz.analyses.whatif.timed_graph import scenario_in_timed, timed_model
from traceviz.analyses.work import analysis_windows
from traceviz.errors import InputError
from traceviz.opcost.peaks import Peak
from traceviz.table.schema import is_in
from traceviz.units import fmt_ns

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace


# what every scenario on a trace with collectives assumes of the ranks it does not hold
COLLECTIVES_KEPT = ("the other ranks arrive at each collective as recorded: a collective "
                    "kernel starts no earlier and ends no earlier than in the trace (time "
                    "this rank waited for the others is not saved)")


@dataclass(frozen=True)
class Scenario:
    name: str
    applies: bool
    predicted_ns: int | None = None
    saving_ns: int | None = None
    assumptions: tuple[str, ...] = ()
    reason: str = ""          # why it does not apply
    path_ns: int | None = None  # what it takes off the critical path as replayed
    # per step in timed (unprofiled) time, by the model of analyses/timed.py; None where
    # the run has no timed step or no steps
    timed_step_ns: float | None = None
    timed_saving_step_ns: float | None = None
    parts: tuple[str, ...] = ()  # the scenarios applied together (name joins them by +)
    # what it does to work on several streams (serialized, waits removed); "": nothing
    caveat: str = ""

    @property
    def saving_fraction(self) -> float | None:
        return None if self.saving_ns is None or self.predicted_ns is None else \
            self.saving_ns / (self.predicted_ns + self.saving_ns)


@dataclass(frozen=True)
class WhatIf:
    measured_ns: int
    replayed_ns: int
    measured_steps: pd.Series
    replayed_steps: pd.Series
    steps: int
    devices: int               # devices whose window time is summed
    is_cpu: bool
    model: dict[str, Any]      # what the replay learnt from the trace
    scenarios: list[Scenario] = field(default_factory=list)
    timed: TimedStep | None = None  # the run's profiled and timed step

    @property
    def replay_error(self) -> float | None:
        return self.replayed_ns / self.measured_ns - 1 if self.measured_ns else None

    @property
    def step_error_max(self) -> float | None:
        m, r = self.measured_steps, self.replayed_steps
        if m.empty:
            return None
        both = m.index.intersection(r.index)
        return float(((r[both] - m[both]).abs() / m[both]).max()) if len(both) else None

    def scenario(self, name: str) -> Scenario:
        return next(s for s in self.scenarios if s.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "measured_ns": self.measured_ns,
            "replayed_ns": self.replayed_ns,
            "replay_error": self.replay_error,
            "step_error_max": self.step_error_max,
            "steps": self.steps,
            "devices": self.devices,
            "model": self.model,
            "scenarios": [
                {"name": s.name, "parts": list(s.parts or (s.name,)),
                 "applies": s.applies, "predicted_ns": s.predicted_ns,
                 "saving_ns": s.saving_ns, "saving_fraction": s.saving_fraction,
                 "assumptions": list(s.assumptions), "path_removed_ns": s.path_ns,
                 **({"reason": s.reason} if s.reason else {}),
                 **({"caveat": s.caveat} if s.caveat else {}),
                 "per_step": {"predicted_ns": _per(s.predicted_ns, self.steps),
                              "saving_ns": _per(s.saving_ns, self.steps),
                              "timed_predicted_ns": s.timed_step_ns,
                              "timed_saving_ns": s.timed_saving_step_ns}}
                for s in self.scenarios
            ],
            "timed_step": None if self.timed is None else self.timed.to_dict(),
            # as whatif prints them: per step where the trace has steps
            "per_step": {"measured_ns": _per(self.measured_ns, self.steps),
                         "replayed_ns": _per(self.replayed_ns, self.steps)},
        }


def _per(ns: float | None, steps: int) -> float | None:
    return None if ns is None else ns / max(steps, 1)


def _named(name: str, text: str, several: bool) -> str:
    return f"{name}: {text}" if several else text


def _cannot(trace: Trace, g: ReplayGraph, measured: Windows, name: str, several: bool
            ) -> str | None:
    """Why a scenario cannot apply to this trace at all (None: it can)."""
    spec = SCENARIOS[name]
    if trace.is_cpu and spec.cpu_reason:
        return _named(name, spec.cpu_reason, several)
    if spec.needs_steps and not len(measured.per_step):
        return _named(name, f"the trace marks no steps ({spec.needs_steps})", several)
    if spec.rewrites_launches and not g.h_launch.any():
        return _named(name, "no launch call in the trace (its device rows' launches were "
                            "not recorded)", several)
    return None


def busiest_stream_work(g: ReplayGraph, windows: dict[int, pd.DataFrame]) -> int:
    """Per device, the work left on its busiest stream inside the trace's ``windows``
    (rows a scenario removed left out), summed over devices: no replay can be shorter."""
    keep = ~g.d_removed
    total = 0
    for device, w in windows.items():
        mine = keep & (g.d_device == device)
        if not mine.any():
            continue
        ws, we = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
        ts = g.d_ts[mine]
        k = np.searchsorted(ws, ts, side="right") - 1
        inside = (k >= 0) & (ts < we[np.maximum(k, 0)])
        if inside.any():
            per = pd.Series(g.d_dur[mine][inside]).groupby(g.d_stream[mine][inside]).sum()
            total += int(per.max())
    return total


def _replayed(g: ReplayGraph, sol: Solution | None = None) -> Windows:
    sol = solve(g) if sol is None else sol
    return window_time(replayed_trace(g, sol), g.h_rows if g.trace.is_cpu else None)


def refuse_ranges_only(trace: Trace) -> None:
    """One line for an export of user ranges alone (NVTX without CUDA): a range says
    how long the host spent, not what ran, so there is no work to replay."""
    ev = trace.events
    if not is_in(ev["kind"], "kernel", "memcpy", "memset", "runtime", "op").any() \
            and is_in(ev["kind"], "annotation", "step").any():
        raise InputError("nothing to replay: the trace holds user ranges (NVTX) alone, "
                         "and ranges cannot be replayed; `traceviz analyze` summarizes them")


def whatif(trace: Trace, scenarios: tuple[str, ...] = DEFAULT_SCENARIOS,
           peak: Peak | None = None, windows: dict[int, pd.DataFrame] | None = None
           ) -> WhatIf:
    """Replay the trace as recorded and under each scenario. ``peak``: the device's peak
    the command resolved (``--peak``; None: the trace's device's); ``windows``: the trace's
    analysis windows where the caller has them (computed here, once, when not given)."""
    parsed = [(text, parse_scenarios(text)) for text in scenarios]
    refuse_ranges_only(trace)
    g = build(trace)
    given = Given(analysis_windows(trace) if windows is None else windows, peak)
    measured = window_time(trace, windows=given.windows)
    sol = solve(g)
    identity = _replayed(g, sol)
    points, path = path_of(g, sol)
    model_t, tg = timed_model(trace, g, measured, _replayed, given.windows)
    out = []
    for text, parts in parsed:
        names = tuple(name for name, _ in parts)
        reason = next((r for r in (_cannot(trace, g, measured, name, len(parts) > 1)
                                   for name, _ in parts) if r), None)
        if reason:
            out.append(Scenario(text, False, reason=reason, parts=names))
            continue
        changed, assumptions, idle = g, [], []
        for name, x in parts:  # in the order given, each on the last one's graph
            changed, notes = SCENARIOS[name].apply(changed, x, given)
            assumptions += notes
            if not notes:
                idle.append(name)
        if not assumptions:
            out.append(Scenario(text, False, reason="; ".join(
                _named(n, SCENARIOS[n].nothing_to_change, len(parts) > 1) for n in idle),
                parts=names))
            continue
        assumptions += [f"{n}: nothing to change ({SCENARIOS[n].nothing_to_change})"
                        for n in idle]
        if g.d_not_before is not None:
            assumptions.append(COLLECTIVES_KEPT)
        replayed = _replayed(changed)
        predicted = replayed.span_ns
        floor = busiest_stream_work(changed, given.windows)
        if predicted < floor:  # no replay may run a stream's work faster than back to back
            assumptions.append(
                f"the replay came out shorter than the work left on the busiest stream of "
                f"each device ({fmt_ns(floor / max(len(measured.per_step), 1))}"
                f"{' per step' if len(measured.per_step) else ''}): "
                "the prediction is that work, back to back")
            predicted = floor
        saving = identity.span_ns - predicted
        removed = removed_from_path(g, changed, points, path)
        if removed is not None:
            assumptions.append(path_check(saving, removed, len(measured.per_step)))
        t_step, t_saving = scenario_in_timed(tg, changed, model_t, _replayed)
        caveat = cross_stream_caveat(trace, g, changed, max(len(measured.per_step), 1),
                                     given.windows)
        out.append(Scenario(text, True, predicted, saving, tuple(assumptions), path_ns=removed,
                            timed_step_ns=t_step, timed_saving_step_ns=t_saving,
                            parts=names, caveat=caveat))
    model = {
        "launch_latency_ns": g.latency_ns, "queue_gap_ns": g.queue_gap_ns,
        "wait_latency_ns": g.wait_latency_ns,
        "inferred_waits": int((g.d_dep >= 0).sum()) - g.event_waits,
        "event_waits": g.event_waits,
        "cross_stream_waits": int((g.d_dep >= 0).sum()),
        "stream_wait_calls": wait_calls(trace.events["name"].take(g.h_rows)),
        "unexplained_waits": {"rows": g.unexplained_rows, "ns": g.unexplained_ns},
        "synchronizing_calls": int((g.h_await >= 0).sum()),
        "host_nodes": len(g.h_ts), "device_rows": len(g.d_ts),
        "timed_host_factor": tg.factor if tg else None,
        "timed_replayed_step_ns": tg.per_step(tg.identity) if tg else None,
    }
    return WhatIf(measured.span_ns, identity.span_ns, measured.per_step, identity.per_step,
                  len(measured.per_step), measured.devices, trace.is_cpu, model, out,
                  model_t)
