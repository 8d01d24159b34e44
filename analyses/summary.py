"""Everything ``traceviz analyze`` reports, in one dataclass with a stable JSON form."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd
from traceviz.analyses.casts import CastSummary, cast_summary
from traceviz.analyses.kernels import category_table, kernel_table
from traceviz.analyses.launch import LaunchOverhead, launch_overhead
from traceviz.analyses.stats import Distribution
from traceviz.analyses.work import DeviceBusy, device_busy, step_windows, trace_busy_ns, work_rows

from traceviz.trace import Trace


@dataclass
class Summary:
    meta: dict[str, Any]
    cpu_trace: bool
    scope: str                       # "steps" or "trace": what busy/span cover
    steps: int
    span_ns: int
    busy_ns: int
    trace_busy_ns: int               # union of all work, whole trace
    idle_fraction: float | None      # 1 - busy/span (launch-bound or framework overhead)
    devices: list[DeviceBusy]
    kernels: pd.DataFrame            # per name (see kernel_table)
    kernel_count: int
    kernel_total_ns: int
    device_total_ns: int             # kernels + memcpy + memset time (sum, not union)
    categories: pd.DataFrame
    launches: LaunchOverhead
    casts: CastSummary
    kernel_dur: Distribution
    notes: list[str] = field(default_factory=list)

    def to_dict(self, top: int = 20) -> dict[str, Any]:
        """The ``--json`` object (keys documented in README.md)."""
        k = self.kernels.head(top)
        gpu = not self.cpu_trace
        return {
            "source": {key: self.meta.get(key) for key in
                       ("source_format", "source_file", "profiler", "devices")},
            "trace_type": "cpu" if self.cpu_trace else "gpu",
            "scope": self.scope,
            "steps": self.steps,
            "span_ns": self.span_ns,
            "busy_ns": self.busy_ns,
            "trace_busy_ns": self.trace_busy_ns,
            "launch_bound_fraction": self.idle_fraction if gpu else None,
            "framework_overhead_fraction": None if gpu else self.idle_fraction,
            "devices": [
                {"device": d.device, "busy_ns": d.busy_ns, "span_ns": d.span_ns,
                 "work_count": d.work_count, "idle_fraction": d.idle_fraction}
                for d in self.devices
            ],
            "kernels": {"count": self.kernel_count, "total_ns": self.kernel_total_ns,
                        "distinct": len(self.kernels), "device_total_ns": self.device_total_ns,
                        "dur_ns": asdict(self.kernel_dur)},
            "launches": {
                "count": self.launches.count, "matched": self.launches.matched,
                "host_ns": self.launches.host_ns, "api_share": self.launches.api_share,
                "call_ns": asdict(self.launches.call), "delay_ns": asdict(self.launches.delay),
                "short_kernels": self.launches.short_kernels,
                "unlaunched_kernels": self.launches.unlaunched_kernels,
            },
            "categories": {
                r.category: {"count": int(r.count), "total_ns": int(r.total_ns),
                             "share": float(r.share)}
                for r in self.categories.itertuples(index=False)
            },
            "top_kernels": [
                {"name": r.name, "category": r.category, "count": int(r.count),
                 "total_ns": int(r.total_ns), "mean_ns": float(r.mean_ns),
                 "share": float(r.share)}
                for r in k.itertuples(index=False)
            ],
            "casts": {"count": self.casts.count, "total_ns": self.casts.total_ns,
                      "share_of_busy": self.casts.share_of_busy,
                      "cast_ops": self.casts.cast_ops},
            "notes": self.notes,
        }


def summarize(trace: Trace) -> Summary:
    """Run every analysis of ``traceviz analyze`` on ``trace``."""
    work = work_rows(trace)
    devices = device_busy(trace, work)
    span = sum(d.span_ns for d in devices)
    busy = sum(d.busy_ns for d in devices)
    windows = step_windows(trace)
    whole_busy = trace_busy_ns(work)
    kernels_only = work if trace.is_cpu else work[work["kind"] == "kernel"]
    notes = []
    if trace.is_cpu:
        notes.append("CPU trace: no device rows; leaf framework ops play the kernels.")
    if trace.is_cpu and (trace.events["kind"] == "runtime").any():
        notes.append("The trace has CUDA/HIP runtime calls but no device rows: GPU activity "
                     "was not recorded (e.g. a CUPTI counter session).")
    if not len(work):
        notes.append("The trace has no kernels and no framework ops to analyze.")
    return Summary(
        meta=trace.meta,
        cpu_trace=trace.is_cpu,
        scope="steps" if len(windows) else "trace",
        steps=len(windows),
        span_ns=span,
        busy_ns=busy,
        trace_busy_ns=whole_busy,
        idle_fraction=1.0 - busy / span if span else None,
        devices=devices,
        kernels=kernel_table(kernels_only),
        kernel_count=len(kernels_only),
        kernel_total_ns=int(kernels_only["dur_ns"].sum()),
        device_total_ns=int(work["dur_ns"].sum()),
        categories=category_table(work),
        launches=launch_overhead(trace, span),
        casts=cast_summary(trace, work, whole_busy),
        kernel_dur=Distribution.of(kernels_only["dur_ns"].to_numpy()),
        notes=notes,
    )
