"""Advice rules about the benchmark itself: noisy timings, profiled steps unlike the timed
ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceviz.analyses.advice.actions import built_in, script_run
from traceviz.analyses.advice.finding import Finding
from traceviz.units import fmt_ns, fmt_pct

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

PROFILED_OFF_HIGH = 2.5     # profiled / timed median step
PROFILED_OFF_LOW = 0.4


def noisy(ctx: Context) -> Finding | None:
    """The run's timed batches are NOISY (CV > 10% or max/min > 1.5)."""
    t = ctx.summary.timings
    if t is None or not t.noisy:
        return None
    return Finding(
        "noisy", "The benchmark is noisy",
        [f"{t.batches} timed batches: CV {fmt_pct(t.cv)}, max/min {t.max_over_min:.2f}, "
         f"median {fmt_ns(t.median_s * 1e9)}"],
        ("let the script run more steps after the profiled ones (they are the timed "
         "batches) and raise --warmup" if script_run(ctx.trace.meta) else
         "time more batches (--steps), raise --max-warmup" if built_in(ctx) else
         "time more batches")
        + ", keep the machine otherwise idle (CPU frequency pinned, no other jobs) before "
        "comparing variants",
        None, None, {"cv": t.cv, "max_over_min": t.max_over_min})


def profiled_unlike_timed(ctx: Context) -> Finding | None:
    """The profiled steps took >= 2.5x (or <= 0.4x) the timed median, outside the timed
    batches' range: the trace's proportions may not be the timed run's."""
    t = ctx.summary.timings
    if t is None or t.profiler_overhead is None or not t.overhead_significant:
        return None
    x = t.profiler_overhead
    if PROFILED_OFF_LOW < x < PROFILED_OFF_HIGH:
        return None
    return Finding(
        "profiled_unlike_timed", f"The profiled steps took {x:.1f}x the timed ones",
        [f"the profiled steps took {x:.2f}x the timed median (the steady profiled step, "
         f"{fmt_ns((t.profiled_step_s or 0) * 1e9)}, the profiler's start-up step left out, "
         f"from {'bench.json' if t.profiled_from == 'bench' else 'the trace'}, against "
         f"{fmt_ns(t.median_s * 1e9)}; timed range {fmt_ns(t.min_s * 1e9)}-"
         f"{fmt_ns(t.max_s * 1e9)})"],
        "judge speed by the timed figures; before acting on the trace's proportions, "
        "capture again with a lighter profiler (--profiler nsys) or more --profile-steps "
        "and see whether the same work dominates",
        None, None, {"profiler_overhead": x})
