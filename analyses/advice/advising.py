"""``advise``: every rule of ``rules.RULES`` run in order on one ``Context``, the findings
sorted by the saving a user pays; the ``Context`` the rules read (the trace, its summary,
the what-if scenarios their rows declare, each computed once)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import pandas as pd

from traceviz.analyses.advice.bound import BOUND_RULES, Bound
from traceviz.analyses.advice.finding import Finding, in_timed, no_loss
from traceviz.analyses.advice.rules import RULES, SHARED_SCENARIOS
from traceviz.analyses.advice.runkind import RunKind, run_kind
from traceviz.analyses.summary.figures import Summary, summarize
from traceviz.analyses.timed import TimedStep
from traceviz.analyses.whatif.engine import Scenario, WhatIf, whatif
from traceviz.analyses.work import analysis_windows
from traceviz.errors import TraceVizError
from traceviz.opcost.peaks import Peak
from traceviz.table.frameworks import trace_framework

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace


@dataclass
class Context:
    """What rules share: the trace, the device's peak the command was given (``--peak``;
    None: the trace's device's), the trace's analysis windows, its summary and the whatif
    scenarios the rules declare (``rules.SHARED_SCENARIOS``), each computed once, when a
    rule first asks, and handed to what computes the others."""

    trace: Trace
    peak: Peak | None = None

    @cached_property
    def windows(self) -> dict[int, pd.DataFrame]:
        """The trace's analysis windows (``work.analysis_windows``), per device."""
        return analysis_windows(self.trace)

    @cached_property
    def summary(self) -> Summary:
        return summarize(self.trace, with_efficiency=True, peak=self.peak,
                         windows=self.windows)

    @cached_property
    def device_peak(self) -> Peak | None:
        """The one peak the rules and their scenarios price by: ``peak``, else the one
        the summary's efficiency found for the trace's device."""
        if self.peak is not None or self.trace.is_cpu or self.trace.kernel_activity_missing:
            return self.peak
        e = self.summary.efficiency
        return None if e is None else e.peak

    def _replay(self, scenarios: tuple[str, ...]) -> WhatIf:
        return whatif(self.trace, scenarios, self.device_peak, self.windows)

    @cached_property
    def _whatif(self) -> WhatIf | None:
        try:
            return self._replay(SHARED_SCENARIOS)
        except TraceVizError:  # nothing to replay: advice without a saving
            return None

    def saving(self, scenario: str) -> int | None:
        """A scenario of the shared set (one a rule's row declares), replayed with the
        others once."""
        if scenario not in SHARED_SCENARIOS:
            raise ValueError(f"{scenario} is in no rule's row (rules.RULES): declare it "
                             "in the row of the rule that prices with it")
        w = self._whatif
        if w is None:
            return None
        s = w.scenario(scenario)
        return s.saving_ns if s.applies else None

    def saving_of(self, scenario: str) -> int | None:
        """A scenario outside the shared set (a factor a rule computed), replayed alone."""
        s = self.scenario(scenario)
        return s.saving_ns if s is not None and s.applies else None

    def scenario(self, name: str) -> Scenario | None:
        """The scenario ``name`` as replayed: from the shared set, else alone (once)."""
        w = self._whatif
        if w is not None and any(s.name == name for s in w.scenarios):
            return w.scenario(name)
        if name not in self._alone:
            try:
                self._alone[name] = self._replay((name,)).scenario(name)
            except TraceVizError:
                self._alone[name] = None
        return self._alone[name]

    @cached_property
    def _alone(self) -> dict[str, Scenario | None]:
        return {}

    @property
    def timed(self) -> TimedStep | None:
        """The run's profiled and timed step (analyses/timed.py)."""
        return self.summary.timed

    @property
    def timed_host_factor(self) -> float | None:
        """The factor the timed calibration scales the replay's host work by so that it
        lasts the timed step (whatif's model; None: no timed step, nothing replayed)."""
        w = self._whatif
        return None if w is None else w.model.get("timed_host_factor")

    @property
    def steps(self) -> int:
        return self.summary.steps

    @cached_property
    def framework(self) -> str:
        """``tf`` for TensorFlow/JAX profiles (XSpace), ``mxnet``, ``none`` for an Nsight
        Systems export of a program no framework's ops or kernels show (C/CUDA), else
        ``torch``: which framework's remedies an action names."""
        name = self.framework_name
        return "tf" if name == "jax" else name

    @cached_property
    def framework_name(self) -> str:
        """``torch``, ``tf``, ``jax``, ``mxnet`` or ``none``: ``framework`` with TensorFlow
        and JAX apart (``table/frameworks.trace_framework``, the one rule)."""
        return trace_framework(self.trace.meta, self.trace.events["name"])

    @cached_property
    def run(self) -> RunKind:
        """What the run is: training or inference, how it is parallel (``runkind.py``)."""
        return run_kind(self.trace)

    @property
    def bound(self) -> Bound:
        """What bounds the step (``summary/verdict.py``): the summary's one verdict."""
        return self.summary.bound


def advise(trace: Trace, peak: Peak | None = None) -> tuple[list[Finding], int]:
    """Every rule's finding on ``trace``, biggest estimated saving first, and the number
    of steps the savings are over (``peak``: the device's peaks, overriding its row)."""
    found, steps, _ = advise_timed(trace, peak)
    return found, steps


def advise_timed(trace: Trace, peak: Peak | None = None
                 ) -> tuple[list[Finding], int, TimedStep | None]:
    """``advise``, and the run's profiled and timed step the savings were carried by."""
    ctx = Context(trace, peak)
    found, steps = _advise(ctx)
    return found, steps, ctx.timed


@dataclass(frozen=True)
class Advice:
    """``advise``'s whole answer: what bounds the step, the findings (its finding first),
    the steps the savings are over and the run's profiled and timed step."""

    bound: Bound
    findings: list[Finding]
    steps: int
    timed: TimedStep | None

    def to_dict(self) -> dict:
        return {"steps": self.steps,
                "timed_step": None if self.timed is None else self.timed.to_dict(),
                "bound": self.bound.to_dict(),
                "findings": [f.to_dict(self.steps) for f in self.findings]}


def advise_full(trace: Trace, peak: Peak | None = None) -> Advice:
    """``advise`` with the verdict on what bounds the step (``peak``: the device's peaks,
    overriding its row: ``--peak``)."""
    ctx = Context(trace, peak)
    found, steps = _advise(ctx)
    return Advice(ctx.bound, found, steps, ctx.timed)


def _advise(ctx: Context) -> tuple[list[Finding], int]:
    rules = RULES
    if ctx.trace.kernel_activity_missing:  # no device time: only the benchmark's rules judge
        rules = tuple(r for r in RULES if r.name == "no_kernel_activity"
                      or r.theme == "timing")
    found = [in_timed(no_loss(f), ctx) for rule in rules if (f := rule(ctx)) is not None]
    # the finding that names what bounds the step first (bound.py), then the biggest
    # saving in the time a user pays (profiled where no timed step)
    first = BOUND_RULES.get(ctx.bound.by, ())
    return sorted(found, key=lambda f: (f.rule not in first,
                                        -(f.timed_saving_ns_per_step
                                          if f.timed_saving_ns_per_step is not None
                                          else (f.saving_ns or 0) / max(ctx.steps, 1)))), \
        ctx.steps

