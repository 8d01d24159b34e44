"""The what-if scenarios: one row per scenario (``ScenarioSpec``) in ``SCENARIOS``, the
scenarios ``whatif`` replays by default, and the parser of ``--scenario`` texts.

A scenario is a graph transform (its own module: ``transforms.py``, ``graphs.py``,
``ladder.py``) plus its row here; ``engine.py`` replays it, the row says what it needs from
the trace and what ``whatif`` says where it cannot apply or finds nothing to change.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from traceviz.analyses.replay.graph import ReplayGraph
from traceviz.analyses.whatif.attention import fuse_attention
from traceviz.analyses.whatif.copies import overlap_copies
from traceviz.analyses.whatif.given import Given
from traceviz.analyses.whatif.graphs import cuda_graphs
from traceviz.analyses.whatif.inputs import overlap_input
from traceviz.analyses.whatif.ladder import batch_input_gemms, drop_stream_sync, merge_gemms
from traceviz.analyses.whatif.stalls import drop_host_stalls
from traceviz.analyses.whatif.transforms import (
    fuse_pointwise,
    gemm_speedup,
    host_speedup,
    no_casts,
)
from traceviz.errors import UsageError

# (graph, factor: 0 where the scenario takes none[, what the command resolved: a row
# with takes_given]) -> (changed graph, the assumptions it states; none: it found nothing
# to change)
Transform = Callable[..., tuple[ReplayGraph, list[str]]]


@dataclass(frozen=True)
class ScenarioSpec:
    """One what-if scenario: its transform and what ``whatif`` needs to know about it."""

    name: str
    transform: Transform
    nothing_to_change: str  # what the trace lacks when the transform changes nothing
    takes_factor: bool = False  # written name=factor (gemm_speedup=2)
    cpu_reason: str | None = None  # why it does not apply on a CPU trace (None: it does)
    rewrites_launches: bool = False  # it needs the trace's launch calls
    needs_steps: str | None = None  # why it needs the trace's step marks (None: it does not)
    takes_given: bool = False  # it reads the command's windows or peak (``given.Given``)

    def apply(self, g: ReplayGraph, x: float, given: Given | None
              ) -> tuple[ReplayGraph, list[str]]:
        """The transform on ``g``: with ``given`` where its row takes it."""
        return self.transform(g, x, given) if self.takes_given else self.transform(g, x)


SCENARIOS: dict[str, ScenarioSpec] = {s.name: s for s in (
    ScenarioSpec("cuda_graphs", cuda_graphs,
                 "no launch call inside a step (graphs are built per step)",
                 cpu_reason="a CPU trace has no launches to capture in a graph",
                 rewrites_launches=True, needs_steps="graphs are built per step"),
    ScenarioSpec("fuse_pointwise", fuse_pointwise,
                 "no two elementwise kernels launched one after the other",
                 cpu_reason="a CPU trace has no kernel launches; its elementwise ops run "
                            "inline, and their fusion is not modelled",
                 rewrites_launches=True),
    ScenarioSpec("no_casts", no_casts, "no cast in the trace"),
    ScenarioSpec("gemm_speedup", gemm_speedup, "no gemm or rnn work in the trace",
                 takes_factor=True),
    ScenarioSpec("host_speedup", host_speedup, "no host time between calls",
                 takes_factor=True),
    ScenarioSpec("merge_gemms", merge_gemms,
                 "no block of launches with a GEMM repeated back to back inside one "
                 "recurrence step",
                 cpu_reason="a CPU trace has no kernel launches; its GEMM ops run inline, "
                            "and merging them is not modelled",
                 rewrites_launches=True),
    ScenarioSpec("batch_input_gemms", batch_input_gemms,
                 "no GEMM call repeated back to back more times than one recurrence step "
                 "holds",
                 cpu_reason="a CPU trace has no kernel launches; its GEMM ops run inline, "
                            "and batching them is not modelled",
                 rewrites_launches=True),
    ScenarioSpec("drop_stream_sync", drop_stream_sync,
                 "no event call, no stream bookkeeping op and one stream per device",
                 cpu_reason="a CPU trace has no streams or events to synchronize them",
                 rewrites_launches=True),
    ScenarioSpec("fuse_attention", fuse_attention,
                 "no softmax over [..., S, S] scores between batched matmuls with recorded "
                 "shapes, on a device whose peaks are known",
                 cpu_reason="a CPU trace has no attention kernels to fuse", takes_given=True),
    ScenarioSpec("overlap_input", overlap_input,
                 "no input call (DataLoader __next__, IteratorGetNext, a data phase) with "
                 "host time inside it between calls"),
    ScenarioSpec("drop_host_stalls", drop_host_stalls,
                 "no untraced stretch of 1 ms or more and no OS wait between a launching "
                 "thread's calls",
                 cpu_reason="a CPU trace's host is its work: nothing waits for it"),
    ScenarioSpec("overlap_copies", overlap_copies,
                 "no host-to-device copy that no kernel overlaps inside the windows, or no "
                 "compute beside which it could run",
                 cpu_reason="a CPU trace has no host-to-device copies", takes_given=True),
)}
# the scenarios that rewrite launch calls (a trace without recorded launches has none)
LAUNCH_SCENARIOS = tuple(n for n, s in SCENARIOS.items() if s.rewrites_launches)
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
    needs = SCENARIOS[name].takes_factor
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
