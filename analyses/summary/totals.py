"""The sections a ``Summary`` holds as its own fields (``summarize`` computes them at once):
the totals, the kernel and category tables, the run's benchmark, the timed step and the
notes. Their parts of ``--json``; the lazy sections' live beside their analyses."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from traceviz.analyses.stats import plain_row
from traceviz.analyses.summary.protocol import Section

if TYPE_CHECKING:  # the Summary type only: figures.py imports the registry
    from traceviz.analyses.summary.figures import Summary
    from traceviz.analyses.timings import Timings


def _totals(s: Summary, top: int) -> dict[str, Any]:
    """Where the trace came from; windows, busy and idle time; devices, streams, kernels."""
    return {
        "source": {key: s.meta.get(key) for key in
                   ("source_format", "source_file", "profiler", "devices")} | (
            {"device_properties": s.meta["device_properties"]}
            if s.meta.get("device_properties") else {}),
        "trace_type": "cpu" if s.cpu_trace else "gpu",
        "scope": s.scope,
        "steps": s.steps,
        "span_ns": s.span_ns,
        "busy_ns": s.busy_ns,
        "idle_ns": s.span_ns - s.busy_ns,
        "host_wait_ns": s.host_wait_ns,
        "queued_idle_ns": s.queued_idle_ns,
        "trace_busy_ns": s.trace_busy_ns,
        "idle_fraction": s.idle_fraction,
        "launch_bound_fraction": s.launch_bound_fraction,
        "framework_overhead_fraction": s.framework_overhead_fraction,
        "queued_idle_fraction": s.queued_idle_fraction,
        "copy_fraction": s.copy_fraction,
        "devices": [
            {"device": d.device, "span_ns": d.span_ns, "busy_ns": d.busy_ns,
             "host_wait_ns": d.host_wait_ns, "queued_idle_ns": d.queued_idle_ns,
             "idle_fraction": d.idle_fraction,
             "launch_bound_fraction": d.launch_bound_fraction,
             "queue_depth": {"mean": d.queue_mean, "max": d.queue_max},
             "work_count": d.work_count}
            for d in s.devices
        ],
        "streams": [plain_row(r) for d in s.devices for r in d.streams.to_dict("records")],
        "kernels": {"count": s.kernel_count, "total_ns": s.kernel_total_ns,
                    "distinct": len(s.kernels), "device_total_ns": s.device_total_ns,
                    "dur_ns": asdict(s.kernel_dur)},
    }


def _kernel_tables(s: Summary, top: int) -> dict[str, Any]:
    """Per category; the ``top`` kernels by total time, the others summed."""
    k = s.kernels.head(top)
    rest = s.kernels.iloc[top:]
    return {
        "categories": {
            r.category: {"count": int(r.count), "total_ns": int(r.total_ns),
                         "share": float(r.share)}
            for r in s.categories.itertuples(index=False)
        },
        "top_kernels": [
            {"name": r.name, **({"config": r.details} if s.by_config else {}),
             "category": r.category, "count": int(r.count),
             "total_ns": int(r.total_ns), "mean_ns": float(r.mean_ns),
             "min_ns": int(r.min_ns), "median_ns": float(r.median_ns),
             "max_ns": int(r.max_ns), "std_ns": float(r.std_ns),
             "share": float(r.share), "rank": i}
            for i, r in enumerate(k.itertuples(index=False), 1)
        ],
        "other_kernels": {"distinct": int(len(rest)), "count": int(rest["count"].sum()),
                          "total_ns": int(rest["total_ns"].sum()),
                          "share": float(rest["share"].sum())},
    }


def _timed_step(s: Summary, top: int) -> dict[str, Any]:
    """The profiled step beside the timed one, and the step per kernel."""
    return {"timed_step": s.timed.to_dict() | {
        "per_kernel_ns": s.host_per_kernel_ns,
        "kernels_per_step": s.kernel_count / max(s.steps, 1)} if s.timed else None}


# the totals' parts: no compute (figures the Summary holds as its own fields)
TOTALS: Section[None] = Section(_totals, keys=(
    "source", "trace_type", "scope", "steps", "span_ns", "busy_ns", "idle_ns",
    "host_wait_ns", "queued_idle_ns", "trace_busy_ns", "idle_fraction",
    "launch_bound_fraction", "framework_overhead_fraction", "queued_idle_fraction",
    "copy_fraction", "devices", "streams", "kernels"))
KERNEL_TABLES: Section[None] = Section(_kernel_tables,
                                       keys=("categories", "top_kernels", "other_kernels"))
TIMINGS: Section[Timings | None] = Section(lambda s, top: {
    "timings": s.timings.to_dict() if s.timings else None})
TIMED_STEP: Section[None] = Section(_timed_step)
NOTES: Section[list[str]] = Section(lambda s, top: {"notes": s.notes})
