"""Benchmark timings a reader can trust: spread, the noisy flag, warm-up, and profiler
overhead only where it exceeds the noise.

The definitions live in ``runners/benchdefs.py`` (the runners write them into bench.json);
here a bench of an older run, without them, gets the same figures from its batch times.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from traceviz.runners.benchdefs import NOISY_CV, NOISY_MAX_OVER_MIN, first_call_seconds, spread


@dataclass(frozen=True)
class Timings:
    batches: int
    median_s: float
    min_s: float
    max_s: float
    mean_s: float
    cv: float                           # stdev / mean of the timed batches
    max_over_min: float
    noisy: bool                         # cv > 10 % or max/min > 1.5
    profiler_overhead: float | None     # profiled median / unprofiled median
    overhead_significant: bool          # profiled median outside [min, max] unprofiled
    warmup_batches: int | None
    warmup_settled: bool | None         # None: a run from before warm-up settled
    first_call_s: float | None = None   # the warm-up batches' time above the median
    compile_s: float | None = None      # the framework's own compile time, where reported

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"noisy_if": {"cv_above": NOISY_CV,
                                            "max_over_min_above": NOISY_MAX_OVER_MIN}}


def timings(bench: dict | None) -> Timings | None:
    """The timings of a bench.json (or a trace's ``meta["bench"]``); None without one."""
    times = [float(t) for t in (bench or {}).get("batch_times_s") or []]
    if not times:
        return None
    s = spread(times)
    prof = bench.get("profiled_time_per_batch_s")  # type: ignore[union-attr]
    overhead = prof / s["median"] if prof and s["median"] else None
    return Timings(
        batches=len(times), median_s=s["median"], min_s=s["min"], max_s=s["max"],
        mean_s=s["mean"], cv=s["cv"], max_over_min=s["max_over_min"],
        noisy=s["noisy"], profiler_overhead=overhead,
        overhead_significant=prof is not None and not s["min"] <= prof <= s["max"],
        warmup_batches=bench.get("warmup_batches"),  # type: ignore[union-attr]
        warmup_settled=bench.get("warmup_settled"),  # type: ignore[union-attr]
        # unknown (not 0) for a run whose bench.json kept no warm-up times
        first_call_s=first_call_seconds(
            [float(t) for t in bench["warmup_times_s"]], s["median"])  # type: ignore[index]
        if (bench or {}).get("warmup_times_s") else None,
        compile_s=bench.get("framework_compile_s"),  # type: ignore[union-attr]
    )
