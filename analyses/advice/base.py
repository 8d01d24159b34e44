"""What every advice rule shares: the ``Finding`` it returns and the ``Context`` it reads
(the trace, its summary and whatif scenarios, each computed once)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from traceviz.analyses.summary.figures import Summary, summarize
from traceviz.analyses.timed import TimedStep
from traceviz.analyses.whatif.engine import Scenario, WhatIf, whatif
from traceviz.errors import TraceVizError
from traceviz.units import fmt_ns

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace


@dataclass(frozen=True)
class Finding:
    rule: str
    title: str
    evidence: list[str]
    action: str
    saving_ns: int | None = None       # from a whatif scenario, over the windows
    saving_scenario: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    # the saving per step in timed (unprofiled) time, the step a user pays (None: the
    # run has no timed step, or the finding no scenario)
    timed_saving_ns_per_step: float | None = None

    def to_dict(self, steps: int = 0) -> dict[str, Any]:
        """The finding, and its saving as ``advise`` prints it: per step where the trace
        has ``steps``."""
        per = None if self.saving_ns is None else self.saving_ns / max(steps, 1)
        return asdict(self) | {"saving_ns_per_step": per}


@dataclass
class Context:
    """What rules share: the trace, its summary and the whatif scenarios, each computed
    once, when a rule first asks."""

    trace: Trace

    @cached_property
    def summary(self) -> Summary:
        return summarize(self.trace, with_efficiency=True)

    @cached_property
    def _whatif(self) -> WhatIf | None:
        try:
            return whatif(self.trace, ("cuda_graphs", "fuse_pointwise", "no_casts",
                                       "host_speedup=2"))
        except TraceVizError:  # nothing to replay: advice without a saving
            return None

    def saving(self, scenario: str) -> int | None:
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
                self._alone[name] = whatif(self.trace, (name,)).scenario(name)
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
    def steps(self) -> int:
        return self.summary.steps

    @cached_property
    def framework(self) -> str:
        """``tf`` for TensorFlow/JAX profiles (XSpace), ``mxnet``, else ``torch``: which
        framework's remedies an action names."""
        fmt = str(self.trace.meta.get("source_format", ""))
        runner = (self.trace.meta.get("runner") or {}).get("framework", "")
        if fmt == "xplane" or runner in ("tensorflow", "jax"):
            return "tf"
        return "mxnet" if fmt == "mxnet" or runner == "mxnet" else "torch"


Rule = Callable[[Context], "Finding | None"]


def no_loss(f: Finding) -> Finding:
    """A finding whose scenario replays slower than the trace claims no saving: it says
    so instead of recommending an action by its own estimate a loss (a vision model whose
    kernels already fill the device: CUDA graphs replayed 1.7 ms/step slower)."""
    if f.saving_ns is None or f.saving_ns >= 0:
        return f
    return replace(f, saving_ns=None, evidence=[
        *f.evidence, f"the {f.saving_scenario} replay predicts no gain here "
        f"({fmt_ns(-f.saving_ns)} slower over the replayed windows): the device, not the "
        "host or launches, sets the pace; the action may not pay"])


def in_timed(f: Finding, ctx: Context) -> Finding:
    """The finding's saving carried to timed time (analyses/timed.py's model), where the
    run has a timed step."""
    if f.saving_ns is None or f.saving_scenario is None:
        return f
    s = ctx.scenario(f.saving_scenario)
    if s is None or s.timed_saving_step_ns is None:
        return f
    if s.timed_saving_step_ns <= 0:
        return replace(f, saving_ns=None, evidence=[
            *f.evidence, f"the {f.saving_scenario} replay predicts no gain per timed step "
            "(the step without the profiler): what it speeds up is not on the chain that "
            "sets the step's length; the action may not pay on its own"])
    return replace(f, timed_saving_ns_per_step=s.timed_saving_step_ns)
