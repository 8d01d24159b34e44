"""whatif's prediction for each rung of a ladder, in timed time.

A rung's change is stood for by a whatif scenario (``Rung.scenario``) replayed on the eager
trace of the rung below it: the predicted timed step (the replay with the profiler's host
cost taken out, analyses/whatif/timed_graph.py) against the rung's measured eager median, and,
with the launches captured in a graph as well (``+cuda_graphs``), against its
graph-replayed median. The error is predicted / measured - 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from traceviz.errors import TraceVizError, UsageError
from traceviz.files.runfolder import read_record
from traceviz.ladder.rungs import (
    BASELINE,
    NO_GRAPH,
    Prediction,
    RungResult,
    factorized_gemm_speedup,
)
from traceviz.runners.presets import Workload


def _rank(run_dirs: list[str]) -> int | None:
    """The factorized rung's rank as its capture was asked for (None: hidden/4)."""
    for d in run_dirs:
        opts = (read_record(Path(d) / "config.json") or {}).get("options") or {}
        if isinstance(opts.get("rank"), int):
            return opts["rank"]
    return None


def scenario_of(r: RungResult, workload: dict[str, Any]) -> str | None:
    """The rung's scenario as whatif takes it (gemm_speedup with the factorization's
    FLOP ratio)."""
    s = r.rung.scenario
    if s == "gemm_speedup":
        t = r.modes.get("eager")
        x = factorized_gemm_speedup(Workload.from_dict(workload), _rank(t.run_dirs if t else []))
        return f"gemm_speedup={x:.3g}"
    return s


def _replay(trace: Any, spec: str) -> tuple[float | None, str]:
    """The scenario's predicted timed step in seconds, or why there is none."""
    from traceviz.analyses.whatif.engine import whatif

    try:
        s = whatif(trace, (spec,)).scenarios[0]
    except UsageError as e:  # a scenario this whatif does not know
        return None, f"{spec}: {e}"
    if not s.applies:
        return None, f"{spec}: {s.reason or 'nothing to change'}"
    if not s.timed_step_ns:
        return None, f"{spec}: the trace has no timed step to predict from (no bench.json)"
    return s.timed_step_ns / 1e9, ""


def predict(results: list[RungResult], workload: dict[str, Any],
            modes: tuple[str, ...], traces: dict[str, Any] | None = None,
            only: set[str] | None = None) -> None:
    """Fill each rung's ``prediction`` (``only``: of these rungs; the others are there as
    the rungs below them); ``traces``: eager traces already loaded, by rung."""
    from traceviz.parsers import load

    by = {r.rung.variant: r for r in results}
    loaded: dict[str, Any] = dict(traces or {})
    unreadable: dict[str, str] = {}  # why a rung's trace could not be read

    def trace_of(name: str) -> Any:
        if name not in loaded:
            t = by[name].modes.get("eager")
            loaded[name] = None
            for d in reversed(t.run_dirs if t else []):  # the latest repeat, as a capture
                try:
                    loaded[name] = load(Path(d))
                    break
                except TraceVizError as e:
                    unreadable.setdefault(name, str(e))
        return loaded[name]

    base = by.get(BASELINE)
    for r in results:
        if only is not None and r.rung.variant not in only:
            continue
        p = r.prediction = Prediction(scenario=scenario_of(r, workload), on=r.rung.below)
        if p.scenario is None:
            p.note = r.rung.no_prediction
            continue
        below = by.get(r.rung.below or "")
        trace = trace_of(below.rung.variant) if below else None
        if trace is None:
            why = unreadable.get(r.rung.below or "")
            p.note = f"no {r.rung.below} trace to replay" + (f" ({why})" if why else "")
            continue
        step, why = _replay(trace, p.scenario)
        p.note = why or f"{p.scenario} on {r.rung.below}'s trace"
        _fill(p, "eager", step, r, base)
        if "graph" not in modes:
            continue
        if r.rung.no_graph:
            p.graph_note = f"{NO_GRAPH}: {r.rung.no_graph}"
            continue
        spec = p.scenario if "cuda_graphs" in p.scenario.split("+") \
            else f"{p.scenario}+cuda_graphs"
        step, why = _replay(trace, spec)
        p.graph_note = why or f"{spec} on {r.rung.below}'s trace"
        _fill(p, "graph", step, r, base)


def _fill(p: Prediction, mode: str, step: float | None, r: RungResult,
          base: RungResult | None) -> None:
    if step is None:
        return
    measured = r.modes.get(mode)
    base_t = base.modes.get(mode) if base else None
    x = base_t.median_s / step if base_t and base_t.median_s else None
    err = step / measured.median_s - 1 if measured and measured.median_s else None
    setattr(p, f"{mode}_step_s", step)
    setattr(p, f"{mode}_x", x)
    setattr(p, f"{mode}_error", err)
