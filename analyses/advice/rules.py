"""The advice rules: one row per rule (``RuleSpec``) in ``RULES``, in the order ``advise``
runs them (findings are then sorted by saving with a stable sort: the order breaks ties).

A rule is one function in its theme's module (``THEMES``: a module of ``analyses/advice/``
each) that returns a ``Finding`` or None, plus its row here, which names the what-if
scenarios it prices with. ``SHARED_SCENARIOS``, the scenarios replayed once for all rules
(``advising.Context``), is what the rows declare, in the order of the scenario registry.

Thresholds are stated in each rule (and in docs/advise.md); a rule that cannot judge
(no steps, no launches, nothing recorded) stays silent.
"""

from __future__ import annotations

from traceviz.analyses.advice.attention import attention
from traceviz.analyses.advice.bound import device_bound
from traceviz.analyses.advice.comm import communication
from traceviz.analyses.advice.copies import serialized_copies
from traceviz.analyses.advice.finding import RuleSpec
from traceviz.analyses.advice.host import host_bound, syncs_in_steps
from traceviz.analyses.advice.idle import long_gaps
from traceviz.analyses.advice.inputs import input_pipeline
from traceviz.analyses.advice.kernels import (
    kernel_sequences,
    memory_bound_gemms,
    no_kernel_activity,
    tensor_core_shapes,
)
from traceviz.analyses.advice.memory import memory_headroom, pageable_memcpy
from traceviz.analyses.advice.precision import (
    autocast_precision,
    casts,
    tf32_off,
    tf32_off_kernels,
)
from traceviz.analyses.advice.startup import startup
from traceviz.analyses.advice.streams import streams_never_overlap
from traceviz.analyses.advice.timing import noisy, profiled_unlike_timed
from traceviz.analyses.whatif.scenarios import SCENARIOS, parse_scenarios

# theme -> what its rules look at; each theme is the module of its rules
THEMES: dict[str, str] = {
    "bound": "what bounds the step: the device's own work",
    "comm": "communication: collectives no computation overlaps, with the remedies of "
            "the way the run is parallel",
    "startup": "start-up: a context made, modules loaded, autotuning, told apart from steps",
    "attention": "attention: unfused softmax between batched matmuls",
    "inputs": "the input pipeline: steps waiting for their next batch",
    "host": "the host and its launches: a host-bound step, synchronizing calls in steps",
    "kernels": "what the kernels are: sequences worth fusing, matrix shapes and intensity",
    "precision": "the precision the work runs in: casts, autocast, TF32",
    "memory": "memory and copies: pageable copies, unused device memory",
    "copies": "copies the step waits for: host-device copies no kernel overlaps",
    "idle": "the device idle for what lies outside the work: long gaps, data loading",
    "timing": "the benchmark itself: noisy timings, profiled steps unlike the timed ones",
    "streams": "work spread over streams",
}

RULES: tuple[RuleSpec, ...] = (
    # first: where it fires, no computation rule can judge (advising._advise)
    RuleSpec(no_kernel_activity, "kernels"),
    RuleSpec(device_bound, "bound"),
    RuleSpec(communication, "comm"),
    RuleSpec(startup, "startup"),
    RuleSpec(input_pipeline, "inputs", scenarios=("overlap_input",)),
    RuleSpec(host_bound, "host", scenarios=(
        "cuda_graphs", "host_speedup=2", "overlap_input+cuda_graphs",
        "overlap_input+host_speedup=2", "drop_host_stalls")),
    RuleSpec(attention, "attention", alone=("fuse_attention",)),
    RuleSpec(kernel_sequences, "kernels", scenarios=("fuse_pointwise",)),
    RuleSpec(casts, "precision", scenarios=("no_casts",)),
    RuleSpec(autocast_precision, "precision"),
    RuleSpec(syncs_in_steps, "host"),
    RuleSpec(pageable_memcpy, "memory"),
    RuleSpec(serialized_copies, "copies", alone=("overlap_copies",)),
    RuleSpec(long_gaps, "idle"),
    RuleSpec(tensor_core_shapes, "kernels"),
    RuleSpec(tf32_off, "precision", alone=("gemm_speedup",)),
    RuleSpec(tf32_off_kernels, "precision", alone=("gemm_speedup",)),
    RuleSpec(memory_bound_gemms, "kernels"),
    RuleSpec(memory_headroom, "memory"),
    RuleSpec(noisy, "timing"),
    RuleSpec(profiled_unlike_timed, "timing"),
    RuleSpec(streams_never_overlap, "streams"),
)


def _registry_order(text: str) -> int:
    return list(SCENARIOS).index(parse_scenarios(text)[0][0])


# what the rules price with, replayed once for all of them: in the scenario registry's order
SHARED_SCENARIOS: tuple[str, ...] = tuple(sorted(
    dict.fromkeys(s for r in RULES for s in r.scenarios), key=_registry_order))
