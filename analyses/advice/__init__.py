"""Advice: the rules, one module per theme, registered in ``rules.py`` (``RULES``), run by
``advising.py`` (``advise``) on one ``Context``.

The face keeps the import path of ``traceviz.analyses.advice`` (once one module): every
rule, its thresholds, the registry, ``advise`` and what the rules share.
"""

from traceviz.analyses.advice.advising import Advice, Context, advise, advise_full, advise_timed
from traceviz.analyses.advice.attention import ATTENTION_SHARE, attention
from traceviz.analyses.advice.bound import Bound, device_bound, step_bound
from traceviz.analyses.advice.comm import communication
from traceviz.analyses.advice.finding import Finding, Rule, RuleSpec, in_timed, no_loss
from traceviz.analyses.advice.host import FRAMEWORK_BOUND, HOST_BOUND, host_bound, syncs_in_steps
from traceviz.analyses.advice.idle import (
    LONG_GAP_NS,
    LONG_GAPS_SHARE,
    long_gaps,
)
from traceviz.analyses.advice.inputs import INPUT_IDLE_SHARE, input_pipeline
from traceviz.analyses.advice.kernels import (
    POINTWISE,
    SEQUENCE_LENGTHS,
    SEQUENCE_MIN_PER_STEP,
    kernel_sequences,
    memory_bound_gemms,
    tensor_core_shapes,
)
from traceviz.analyses.advice.memory import (
    PAGEABLE,
    PAGEABLE_SHARE,
    memory_headroom,
    pageable_memcpy,
)
from traceviz.analyses.advice.precision import (
    CAST_OF_MATRIX,
    autocast_precision,
    casts,
    tf32_off,
    tf32_off_kernels,
)
from traceviz.analyses.advice.rules import RULES, SHARED_SCENARIOS, THEMES
from traceviz.analyses.advice.runkind import RunKind, run_kind
from traceviz.analyses.advice.streams import streams_never_overlap
from traceviz.analyses.advice.timing import noisy, profiled_unlike_timed

__all__ = [
    "ATTENTION_SHARE", "INPUT_IDLE_SHARE", "Advice", "Bound", "advise_full", "attention",
    "communication", "device_bound", "input_pipeline", "step_bound",
    "CAST_OF_MATRIX", "FRAMEWORK_BOUND", "HOST_BOUND", "LONG_GAPS_SHARE",
    "LONG_GAP_NS", "PAGEABLE", "PAGEABLE_SHARE", "POINTWISE", "RULES", "SEQUENCE_LENGTHS",
    "SEQUENCE_MIN_PER_STEP", "SHARED_SCENARIOS", "THEMES", "Context", "Finding", "Rule",
    "RuleSpec", "RunKind", "advise", "advise_timed", "run_kind", "autocast_precision", "casts",
    "host_bound", "in_timed", "kernel_sequences", "long_gaps", "memory_bound_gemms",
    "memory_headroom", "no_loss", "noisy", "pageable_memcpy", "profiled_unlike_timed",
    "streams_never_overlap", "syncs_in_steps", "tensor_core_shapes", "tf32_off",
    "tf32_off_kernels",
]
