"""Figures in the time a user pays: the timed (unprofiled) step, not the profiled one.

A capture times unprofiled batches (bench.json) and profiles a few more; the profiler
slows the step, and by a different amount in every run (its per-call cost lands on the
host: every op and API call is recorded). The model that carries a profiled figure over
to timed time:

- **device work is unchanged by profiling**: a step's kernels and copies take the same
  time with or without the profiler (busy time ``B`` per step);
- **the profiler's cost is host time**: the profiled step ``P`` and the timed step ``T``
  differ in the host's part; ``s = (T - B) / (P - B)`` estimates how much of the profiled
  host-side time is left without the profiler (``host_scale``; 0 where the timed step is
  not longer than the device work). A what-if scenario is carried to timed time by
  replaying it with its host work scaled (``whatif/timed_graph.py``, which starts from ``s``
  and calibrates the factor on the replay), so it never falls below the device work it
  keeps.

Without a timed step figures stay profiled
(``TimedStep.known`` is False) and every command says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceviz.analyses.timings import Timings


@dataclass(frozen=True)
class TimedStep:
    """One run's profiled and timed step, and the scale between them."""

    profiled_ns: float           # the trace's step window (mean over steps and devices)
    device_ns: float             # device busy per step
    timed_ns: float | None       # median timed batch (None: no timing in the run)
    overhead: float | None       # the run's profiler overhead (``Timings``': steady / timed)
    steady_ns: float | None = None   # the steady profiled step (start-up step left out)
    overhead_text: str = "unknown"   # the overhead as every output prints it

    @property
    def known(self) -> bool:
        return self.timed_ns is not None

    @property
    def host_scale(self) -> float | None:
        """s: the share of the profiled non-device time left without the profiler."""
        if self.timed_ns is None:
            return None
        host = self.profiled_ns - self.device_ns
        if host <= 0:
            return 1.0
        return max(0.0, (self.timed_ns - self.device_ns) / host)

    def to_dict(self) -> dict[str, Any]:
        return {"profiled_step_ns": self.profiled_ns, "device_busy_step_ns": self.device_ns,
                "timed_step_ns": self.timed_ns, "steady_profiled_step_ns": self.steady_ns,
                "profiler_overhead": self.overhead,
                "host_scale_estimate": self.host_scale,
                "model": "device work as recorded; host work (calls and the time between "
                         "them) scaled so that the replay lasts the timed step (whatif's "
                         "model.timed_host_factor); host_scale_estimate = (timed - device "
                         "busy) / (profiled - device busy), its first guess"}


def timed_step(timings: Timings | None, span_ns: int, busy_ns: int, steps: int,
               devices: int) -> TimedStep | None:
    """The run's ``TimedStep`` from its summary figures (None: no step in the trace)."""
    if steps <= 0 or span_ns <= 0:
        return None
    n = steps * max(devices, 1)
    profiled, device = span_ns / n, busy_ns / n
    if timings is None:
        return TimedStep(profiled, device, None, None)
    # the overhead is the run's one figure (``Timings``: the steady profiled step over the
    # timed median), the same in bench.json, analyze, advise and the report
    steady = timings.profiled_step_s
    return TimedStep(profiled, device, timings.median_s * 1e9, timings.profiler_overhead,
                     steady * 1e9 if steady is not None else None, timings.overhead_text)
