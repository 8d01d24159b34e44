"""RULES and the findings they return, one module per theme.

The face keeps the import path of ``traceviz.analyses.advice`` (once one module): the
names of ``rules.py``.
"""

from traceviz.analyses.advice.rules import (
    CAST_OF_MATRIX,
    DATA_SHARE,
    FRAMEWORK_BOUND,
    HOST_BOUND,
    LONG_GAP_NS,
    LONG_GAPS_SHARE,
    PAGEABLE,
    PAGEABLE_SHARE,
    POINTWISE,
    RULES,
    SEQUENCE_LENGTHS,
    SEQUENCE_MIN_PER_STEP,
    advise,
    advise_timed,
    casts,
    data_stalls,
    host_bound,
    kernel_sequences,
    long_gaps,
    pageable_memcpy,
    syncs_in_steps,
)

__all__ = [
    "CAST_OF_MATRIX", "DATA_SHARE", "FRAMEWORK_BOUND", "HOST_BOUND", "LONG_GAPS_SHARE",
    "LONG_GAP_NS", "PAGEABLE", "PAGEABLE_SHARE", "POINTWISE", "RULES", "SEQUENCE_LENGTHS",
    "SEQUENCE_MIN_PER_STEP", "advise", "advise_timed", "casts", "data_stalls", "host_bound",
    "kernel_sequences", "long_gaps", "pageable_memcpy", "syncs_in_steps",
]
