"""What every advice rule shares: the ``Finding`` it returns, the ``RuleSpec`` that registers
it (``rules.py``), and what ``advise`` does to each finding's saving (``no_loss``,
``in_timed``). The ``Context`` a rule reads is ``advising.py``'s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from traceviz.units import fmt_ns

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context


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


Rule = Callable[["Context"], "Finding | None"]


@dataclass(frozen=True)
class RuleSpec:
    """One advice rule, as ``rules.RULES`` lists it: the function, its theme (the module of
    ``analyses/advice/`` it lives in, one of ``rules.THEMES``) and the what-if scenarios
    it prices its finding with."""

    rule: Rule
    theme: str
    # scenario texts replayed once for every rule (Context.saving): the shared set
    scenarios: tuple[str, ...] = ()
    # scenario names the rule replays on its own, with a factor it computes, when it fires
    # (Context.saving_of)
    alone: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.rule.__name__

    def __call__(self, ctx: Context) -> Finding | None:
        return self.rule(ctx)


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
    # "a - b": what scenario a adds to scenario b (a finding priced beside another's)
    plus, _, minus = f.saving_scenario.partition(" - ")
    s, base = ctx.scenario(plus), ctx.scenario(minus) if minus else None
    if s is None or s.timed_saving_step_ns is None:
        return f
    timed = s.timed_saving_step_ns
    if minus:
        if base is None or base.timed_saving_step_ns is None:
            return f
        timed -= base.timed_saving_step_ns
    if timed <= 0:
        return replace(f, saving_ns=None, evidence=[
            *f.evidence, f"the {f.saving_scenario} replay predicts no gain per timed step "
            "(the step without the profiler): what it speeds up is not on the chain that "
            "sets the step's length; the action may not pay on its own"])
    return replace(f, timed_saving_ns_per_step=timed)
