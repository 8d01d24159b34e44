"""What would an optimization buy: scenarios as transformations of the replay graph
(``analyses/replay/graph.py``), each replayed and measured over the same windows as the trace.

A scenario's saving is against the identity replay (the graph unchanged), so the
model's own error cancels; ``replay_error`` says how well the identity replay
reproduces the measured window time. Each scenario states its assumptions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.critical_path.path import path_of, removed_from_path
from traceviz.analyses.replay.graph import ReplayGraph, Solution, build, solve
from traceviz.analyses.replay.measure import Windows, replayed_trace, window_time
from traceviz.analyses.replay.waits import wait_calls
from traceviz.analyses.timed import TimedStep
from traceviz.analyses.whatif.graphs import cuda_graphs
from traceviz.analyses.whatif.ladder import batch_input_gemms, drop_stream_sync, merge_gemms
from traceviz.analyses.whatif.notes import nothing_to_change, path_check
from traceviz.analyses.whatif.timed import scenario_in_timed, timed_model
from traceviz.errors import UsageError

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

MATRIX_CATEGORIES = ("gemm", "rnn")


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
                 **({"reason": s.reason}
                                                        if s.reason else {}),
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


# -- scenarios: (graph, argument) -> (changed graph, assumptions) -------------------
Transform = Callable[[ReplayGraph, float], tuple[ReplayGraph, list[str]]]


def _gemm_speedup(g: ReplayGraph, x: float) -> tuple[ReplayGraph, list[str]]:
    text = (f"gemm and rnn {'ops' if g.trace.is_cpu else 'kernels'} run {x:g}x faster "
            "(what tensor cores or a better library would have to deliver); everything "
            "else as recorded")
    rows = g.h_rows if g.trace.is_cpu else g.d_rows
    mat = np.isin(g.trace.events["category"].to_numpy()[rows].astype(object),
                  MATRIX_CATEGORIES)
    if not mat.any():
        return g, []
    if g.trace.is_cpu:
        return g.with_changes(h_dur=np.where(mat, (g.h_dur / x).astype(np.int64),
                                             g.h_dur)), [text]
    return g.with_changes(d_dur=np.where(mat, (g.d_dur / x).astype(np.int64),
                                         g.d_dur)), [text]


def _host_speedup(g: ReplayGraph, x: float) -> tuple[ReplayGraph, list[str]]:
    if not (g.h_gap > 0).any():
        return g, []
    gap = np.where(g.h_gap > 0, (g.h_gap / x).astype(np.int64), g.h_gap)
    if g.trace.is_cpu:
        return g.with_changes(h_gap=gap), [
            f"the host time between work ops (framework overhead) shrinks {x:g}x, as a "
            "compiled dispatcher would; the work ops keep their time"]
    return g.with_changes(h_gap=gap), [
        f"the host time between runtime calls on every thread (Python, the framework's "
        f"dispatcher) shrinks {x:g}x, as a compiled dispatcher would; the calls themselves "
        "and the device work keep their time; a thread that waited on another thread between "
        "calls is taken to be working"]


def _no_casts(g: ReplayGraph, _: float) -> tuple[ReplayGraph, list[str]]:
    cast = g.trace.events["is_cast"].to_numpy()
    if not cast[g.h_rows if g.trace.is_cpu else g.d_rows].any():
        return g, []
    if g.trace.is_cpu:
        return g.with_changes(h_dur=np.where(cast[g.h_rows], 0, g.h_dur)), [
            "cast ops take no time (the ceiling of what AMP's casts cost); the framework "
            "time around them stays"]
    removed = cast[g.d_rows]
    calls = np.unique(g.d_launch[removed & (g.d_launch >= 0)])
    h_dur = g.h_dur.copy()
    h_dur[calls] = 0
    return g.with_changes(d_removed=g.d_removed | removed, h_dur=h_dur), [
        "cast kernels are removed with their launch calls (the ceiling of what AMP's casts "
        "cost); the host time of the cast ops around the launches stays"]


def _launch_order(g: ReplayGraph) -> np.ndarray:
    """Per host node: its rank among the launch calls of its chain (-1: not a launch)."""
    rank = np.full(len(g.h_ts), -1, np.int64)
    idx = np.flatnonzero(g.h_launch)
    if len(idx):
        rank[idx] = pd.Series(g.h_chain[idx]).groupby(g.h_chain[idx]).cumcount().to_numpy()
    return rank


def _fuse_pointwise(g: ReplayGraph, _: float) -> tuple[ReplayGraph, list[str]]:
    ev = g.trace.events
    cat = ev["category"].to_numpy()[g.d_rows].astype(object)
    elem = (cat == "elementwise") & (g.d_launch >= 0) & ~g.d_from_start & ~g.d_removed
    li = np.maximum(g.d_launch, 0)
    chain = np.where(elem, g.h_chain[li], -1)
    order = np.where(elem, _launch_order(g)[li], -1)
    step = ev["step"].to_numpy(np.int64)[g.d_rows]
    graph_launched = elem & (pd.Series(g.d_launch).duplicated(keep=False).to_numpy())
    elem &= ~graph_launched
    # a run: consecutive rows of one stream, elementwise, launched one right after the
    # other by one thread in one step (nothing else launched between them)
    prev_ok = np.zeros(len(elem), bool)
    prev_ok[1:] = (elem[1:] & elem[:-1] & (g.d_stream[1:] == g.d_stream[:-1])
                   & (chain[1:] == chain[:-1]) & (step[1:] == step[:-1])
                   & (order[1:] == order[:-1] + 1))
    run = np.cumsum(~prev_ok)
    size = np.bincount(run)[run]
    fused = elem & (size >= 2)
    if not fused.any():
        return g, []
    k = pd.Series(size[fused])
    dur = pd.Series(g.d_dur[fused]).groupby(run[fused])
    total, longest, count = dur.transform("sum"), dur.transform("max"), k
    rule = np.maximum(longest, total * (count + 2) / (3 * count)).to_numpy()
    head = fused & ~prev_ok
    tail = fused & prev_ok
    d_dur = g.d_dur.copy()
    d_dur[fused] = np.where(head[fused], rule.astype(np.int64), g.d_dur[fused])
    calls = g.d_launch[tail]
    h_dur = g.h_dur.copy()
    h_gap = g.h_gap.copy()
    h_dur[calls] = 0
    h_gap[calls] = 0
    runs = int(head.sum())
    return g.with_changes(d_dur=d_dur, d_removed=g.d_removed | tail, h_dur=h_dur,
                          h_gap=h_gap), [
        f"{runs} runs of consecutive elementwise kernels ({int(fused.sum())} kernels: one "
        "stream, launched one right after the other by one thread in one step) each "
        "become one kernel with one launch; the other launch calls and the host time "
        "before them go (one op dispatches)",
        "memory-traffic rule: an elementwise kernel moves 3 tensors (2 read, 1 written) at "
        "its recorded speed; a fused run of k moves k+2 (the intermediates stay in "
        "registers), so it lasts max(its longest kernel, its total x (k+2)/3k)",
    ]


# name -> (transform, needs an argument, on a CPU trace: None or why it does not apply)
SCENARIOS: dict[str, tuple[Transform, bool, str | None]] = {
    "cuda_graphs": (cuda_graphs, False, "a CPU trace has no launches to capture in a graph"),
    "fuse_pointwise": (_fuse_pointwise, False,
                       "a CPU trace has no kernel launches; its elementwise ops run inline, "
                       "and their fusion is not modelled"),
    "no_casts": (_no_casts, False, None),
    "gemm_speedup": (_gemm_speedup, True, None),
    "host_speedup": (_host_speedup, True, None),
    "merge_gemms": (merge_gemms, False,
                    "a CPU trace has no kernel launches; its GEMM ops run inline, and merging "
                    "them is not modelled"),
    "batch_input_gemms": (batch_input_gemms, False,
                          "a CPU trace has no kernel launches; its GEMM ops run inline, and "
                          "batching them is not modelled"),
    "drop_stream_sync": (drop_stream_sync, False,
                         "a CPU trace has no streams or events to synchronize them"),
}
# they rewrite launch calls
LAUNCH_SCENARIOS = ("cuda_graphs", "fuse_pointwise", "merge_gemms", "batch_input_gemms",
                    "drop_stream_sync")
DEFAULT_SCENARIOS = ("cuda_graphs", "fuse_pointwise", "no_casts", "gemm_speedup=2",
                     "host_speedup=2")


def parse_scenarios(text: str) -> list[tuple[str, float]]:
    """A scenario or several applied together in one replay, joined by ``+``:
    ``fuse_pointwise+drop_stream_sync`` -> [("fuse_pointwise", 0), ("drop_stream_sync", 0)];
    applied in the order given."""
    parts = re.split(r"\+(?=[A-Za-z_])", text)
    names = [p.partition("=")[0] for p in parts]
    if len(set(names)) < len(names):
        raise UsageError(f"{text}: a scenario appears twice", option="scenario")
    return [parse_scenario(p) for p in parts]


def parse_scenario(text: str) -> tuple[str, float]:
    """``gemm_speedup=2`` -> ("gemm_speedup", 2.0); ``no_casts`` -> ("no_casts", 0)."""
    name, eq, arg = text.partition("=")
    if name not in SCENARIOS:
        raise UsageError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}",
                         option="scenario")
    needs = SCENARIOS[name][1]
    if needs and not arg:
        raise UsageError(f"{name} needs a factor, e.g. {name}=2", option="scenario")
    if not needs and eq:
        raise UsageError(f"{name} takes no value", option="scenario")
    if not needs:
        return name, 0.0
    try:
        x = float(arg)
    except ValueError:
        raise UsageError(f"{name}={arg}: the factor is not a number",
                         option="scenario") from None
    if not x > 0 or not np.isfinite(x):
        raise UsageError(f"{name}={arg}: the factor must be a positive number",
                         option="scenario")
    return name, x


def _named(name: str, text: str, several: bool) -> str:
    return f"{name}: {text}" if several else text


def _cannot(trace: Trace, g: ReplayGraph, measured: Windows, name: str, several: bool
            ) -> str | None:
    """Why a scenario cannot apply to this trace at all (None: it can)."""
    cpu_reason = SCENARIOS[name][2]
    if trace.is_cpu and cpu_reason:
        return _named(name, cpu_reason, several)
    if name == "cuda_graphs" and not len(measured.per_step):
        return _named(name, "the trace marks no steps (graphs are built per step)", several)
    if name in LAUNCH_SCENARIOS and not g.h_launch.any():
        return _named(name, "no launch call in the trace (its device rows' launches were "
                            "not recorded)", several)
    return None


def _replayed(g: ReplayGraph, sol: Solution | None = None) -> Windows:
    sol = solve(g) if sol is None else sol
    return window_time(replayed_trace(g, sol), g.h_rows if g.trace.is_cpu else None)


def whatif(trace: Trace, scenarios: tuple[str, ...] = DEFAULT_SCENARIOS) -> WhatIf:
    """Replay the trace as recorded and under each scenario."""
    parsed = [(text, parse_scenarios(text)) for text in scenarios]
    g = build(trace)
    measured = window_time(trace)
    sol = solve(g)
    identity = _replayed(g, sol)
    points, path = path_of(g, sol)
    model_t, tg = timed_model(trace, g, measured, _replayed)
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
            changed, notes = SCENARIOS[name][0](changed, x)
            assumptions += notes
            if not notes:
                idle.append(name)
        if not assumptions:
            out.append(Scenario(text, False, reason="; ".join(
                _named(n, nothing_to_change(n), len(parts) > 1) for n in idle), parts=names))
            continue
        assumptions += [f"{n}: nothing to change ({nothing_to_change(n)})" for n in idle]
        replayed = _replayed(changed)
        predicted = replayed.span_ns
        saving = identity.span_ns - predicted
        removed = removed_from_path(g, changed, points, path)
        if removed is not None:
            assumptions.append(path_check(saving, removed, max(len(measured.per_step), 1)))
        t_step, t_saving = scenario_in_timed(tg, changed, model_t, _replayed)
        out.append(Scenario(text, True, predicted, saving, tuple(assumptions), path_ns=removed,
                            timed_step_ns=t_step, timed_saving_step_ns=t_saving,
                            parts=names))
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
