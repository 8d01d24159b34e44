"""Benchmark timings a reader can trust: spread, the noisy flag, warm-up, and profiler
overhead only where it exceeds the noise.

The definitions live in ``runners/benchdefs.py`` (the runners write them into bench.json);
here a bench of an older run, without them, gets the same figures from its batch times.
The profiler's overhead is ``benchdefs.profiler_overhead`` everywhere: the steady
profiled step (the profiler's start-up step left out) over the timed median. Its profiled
steps are bench.json's ``profiled_batch_times_s``; a bench.json from before it kept them
takes the trace's own step windows (``run_timings``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.runners.benchdefs import (
    NOISY_CV,
    NOISY_MAX_OVER_MIN,
    first_call_seconds,
    profiler_overhead,
    spread,
)

if TYPE_CHECKING:
    from traceviz.trace import Trace


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
    profiler_overhead: float | None     # steady profiled step / unprofiled median
    overhead_significant: bool          # steady profiled step not benchdefs.within_noise
    warmup_batches: int | None
    warmup_settled: bool | None         # None: a run from before warm-up settled
    first_call_s: float | None = None   # the warm-up batches' time above the median
    compile_s: float | None = None      # the framework's own compile time, where reported
    profiled_step_s: float | None = None  # the steady profiled step (start-up step left out)
    profiled_from: str | None = None    # "bench" (the runner's clock) or "trace steps"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"noisy_if": {"cv_above": NOISY_CV,
                                            "max_over_min_above": NOISY_MAX_OVER_MIN}}

    @property
    def overhead_text(self) -> str:
        """The overhead as every output prints it: the factor where it exceeds the
        noise, else "within noise" (never a factor beside "within noise")."""
        if self.profiler_overhead is None:
            return "unknown"
        return f"{self.profiler_overhead:.2f}x" if self.overhead_significant \
            else "within noise"


def overhead_text(t: Timings | None) -> str:
    """``Timings.overhead_text``, "unknown" without timings."""
    return "unknown" if t is None else t.overhead_text


def timings(bench: dict | None, trace_steps_s: list[float] | None = None) -> Timings | None:
    """The timings of a bench.json (or a trace's ``meta["bench"]``); None without one.
    ``trace_steps_s``: the trace's profiled steps in order, for a bench.json that kept no
    profiled step times of its own."""
    times = [float(t) for t in (bench or {}).get("batch_times_s") or []]
    if not times:
        return None
    assert bench is not None
    s = spread(times)
    prof, source = bench.get("profiled_batch_times_s"), "bench"
    if not prof:
        prof, source = trace_steps_s, "trace steps"
    # the profiled steps stand in for timed ones where the code ran none after them
    over = profiler_overhead([float(p) for p in prof], times) if prof and not str(
        bench.get("timed_from", "")).startswith("the profiled steps") else {}
    return Timings(
        batches=len(times), median_s=s["median"], min_s=s["min"], max_s=s["max"],
        mean_s=s["mean"], cv=s["cv"], max_over_min=s["max_over_min"],
        noisy=s["noisy"], profiler_overhead=over.get("profiler_overhead"),
        overhead_significant=bool(over.get("profiler_overhead_significant")),
        warmup_batches=bench.get("warmup_batches"),
        warmup_settled=bench.get("warmup_settled"),
        # unknown (not 0) for a run whose bench.json kept no warm-up times
        first_call_s=first_call_seconds(
            [float(t) for t in bench["warmup_times_s"]], s["median"])
        if bench.get("warmup_times_s") else None,
        compile_s=bench.get("framework_compile_s"),
        profiled_step_s=over.get("profiled_time_per_batch_s"),
        profiled_from=source if over else None,
    )


def step_lengths_s(windows: dict[int, pd.DataFrame]) -> list[float]:
    """The trace's profiled steps in step order, in seconds: each step's window, the mean
    over the devices that ran it."""
    frames = [w[w["step"] >= 0] for w in windows.values()]
    frames = [f for f in frames if len(f)]
    if not frames:
        return []
    w = pd.concat(frames)
    length = (w["end_ns"].to_numpy(np.int64) - w["start_ns"].to_numpy(np.int64)) / 1e9
    return [float(x) for x in pd.Series(length).groupby(w["step"].to_numpy()).mean()]


def run_timings(trace: Trace, windows: dict[int, pd.DataFrame] | None = None
                ) -> Timings | None:
    """The timings of the trace's run (its ``meta["bench"]``), the profiled steps from
    bench.json or, for an older bench.json, from the trace's step windows (``windows``:
    ``work.analysis_windows``' of the trace, computed here when not given)."""
    bench = trace.meta.get("bench")
    if not bench or not bench.get("batch_times_s"):
        return None
    if bench.get("profiled_batch_times_s"):
        return timings(bench)
    if windows is None:
        from traceviz.analyses.work import analysis_windows

        windows = analysis_windows(trace)
    return timings(bench, step_lengths_s(windows))
