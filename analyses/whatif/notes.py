"""What a what-if scenario's result says in words: its saving held against the critical
path, and why a scenario does not apply."""

from __future__ import annotations


def path_check(saving: int, removed: int, steps: int) -> str:
    """The saving held against what the scenario takes off the critical path."""
    from traceviz.units import fmt_ns

    off = f"it takes {fmt_ns(removed / steps)} per step off the critical path as replayed"
    if removed <= 0:
        return off + ("; the saving comes from work off the path" if saving > 0 else
                      ": the path does not get shorter")
    if saving <= removed * 1.02:
        return off + ("; the saving is that much" if saving >= removed * 0.98 else
                      "; the saving is less: once it is shorter, another chain bounds the step")
    return off + "; the saving is more: it also shortens chains that then bound the step"


def nothing_to_change(name: str) -> str:
    return {
        "cuda_graphs": "no launch call inside a step (graphs are built per step)",
        "fuse_pointwise": "no two elementwise kernels launched one after the other",
        "no_casts": "no cast in the trace",
        "gemm_speedup": "no gemm or rnn work in the trace",
        "host_speedup": "no host time between calls",
        "merge_gemms": "no block of launches with a GEMM repeated back to back inside one "
                       "recurrence step",
        "batch_input_gemms": "no GEMM call repeated back to back more times than one "
                             "recurrence step holds",
        "drop_stream_sync": "no event call, no stream bookkeeping op and one stream per "
                            "device",
    }[name]
