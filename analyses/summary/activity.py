"""Whether the trace holds the kernels its host launched.

A torch.profiler run without ``ProfilerActivity.CUDA`` (or with CUPTI unavailable) records
every ``cudaLaunchKernel`` on the host and no kernel: the launches are there, the device's
time is not. Such a trace is still a GPU trace (``Trace.is_cpu`` is False): its host ops
do not play the kernels, no FLOP rate is made from host time, and what the device did is
unknown (``Summary.kernel_activity_missing``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.analyses.work import missing_activity

if TYPE_CHECKING:  # the Summary type only: figures.py imports the registry
    from traceviz.analyses.summary.figures import Summary


@dataclass(frozen=True)
class KernelActivity:
    launches: int          # kernel and graph launch calls (launch_apis' list)
    kernels: int           # kernel rows
    missing: bool          # launches and no device rows at all
    line: str | None       # what analyze says when missing

    def to_dict(self) -> dict[str, Any]:
        return {"launches": self.launches, "kernels": self.kernels, "missing": self.missing}


def kernel_activity(i: Inputs, s: Summary) -> KernelActivity:
    t = i.trace
    kernels = int((t.events["kind"] == "kernel").sum())
    return KernelActivity(t.kernel_launch_calls, kernels, t.kernel_activity_missing,
                          missing_activity(t))


def _json(s: Summary, top: int) -> dict[str, Any]:
    return {"kernel_activity": s.kernel_activity.to_dict()}


SECTION = Section(_json, kernel_activity)
