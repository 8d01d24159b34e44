"""What a what-if scenario's result says in words: its saving held against the critical
path (why a scenario does not apply, or changes nothing, is its row's in ``scenarios.py``)."""

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

