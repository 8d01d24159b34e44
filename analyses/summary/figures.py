"""Everything ``traceviz analyze`` reports, in one dataclass with a stable JSON form."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pandas as pd

from traceviz.analyses.efficiency.ops import Efficiency, efficiency
from traceviz.analyses.stats import Distribution, plain_row
from traceviz.analyses.summary.casts import CastSummary, cast_summary
from traceviz.analyses.summary.host import HostSplit, host_split, per_device_op_ns
from traceviz.analyses.summary.idle import Idle, host_wait_total, idle_breakdown, launch_bound
from traceviz.analyses.summary.kernels import category_table, kernel_table
from traceviz.analyses.summary.launch import Launches, launch_figures, launch_table
from traceviz.analyses.summary.memory import Memory, memory
from traceviz.analyses.summary.modules import module_table
from traceviz.analyses.summary.phases import phase_table
from traceviz.analyses.summary.streams import StreamOverlap, stream_overlap
from traceviz.analyses.timed import TimedStep, timed_step
from traceviz.analyses.timings import Timings, timings
from traceviz.analyses.work import (
    analysis_windows,
    trace_busy_ns,
    wall_windows,
    work_rows,
)
from traceviz.table.meta import TraceMeta

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace


@dataclass
class _Inputs:
    """What a summary's sections are computed from (its trace, work rows and windows)."""

    trace: Trace
    work: pd.DataFrame
    windows: dict
    ws: Any
    we: Any
    with_efficiency: bool
    peak: Any


@dataclass
class Summary:
    meta: TraceMeta
    cpu_trace: bool
    scope: str                       # "steps" or "trace": what the windows are
    steps: int                       # step windows (per device where steps are per device)
    span_ns: int                     # summed over devices
    busy_ns: int                     # union of work inside the windows, summed over devices
    trace_busy_ns: int               # union of all work, whole trace
    host_wait_ns: int | None         # idle with nothing launched pending (GPU traces)
    queued_idle_ns: int | None       # idle while launched work is pending
    devices: list[Idle]
    kernels: pd.DataFrame            # per name (see kernel_table)
    kernel_count: int
    kernel_total_ns: int
    device_total_ns: int             # kernels + memcpy + memset time (sum, not union)
    categories: pd.DataFrame
    kernel_dur: Distribution
    timings: Timings | None          # the run's benchmark, when the trace carries one
    by_config: bool = False
    notes: list[str] = field(default_factory=list)
    timed: TimedStep | None = None       # profiled vs timed step (None: no steps)
    # what the sections below are computed from, when first read
    inputs: _Inputs | None = field(default=None, repr=False, compare=False)

    # The sections: each computed when first read (a renderer showing it, ``to_dict``),
    # so a command that shows a few of them does not pay for the others.
    @cached_property
    def launches(self) -> Launches:
        i = self._inputs()
        return launch_figures(i.trace, launch_table(i.trace), i.ws, i.we)

    @cached_property
    def casts(self) -> CastSummary:
        i = self._inputs()
        return cast_summary(i.trace, i.work, self.trace_busy_ns)

    @cached_property
    def phases(self) -> pd.DataFrame:
        """Per phase (see phases.phase_table); empty: none marked."""
        i = self._inputs()
        return phase_table(i.trace, i.work, i.ws, i.we)

    @cached_property
    def modules(self) -> pd.DataFrame:
        """Per nn.Module (see modules.module_table); empty: no --modules ranges."""
        i = self._inputs()
        return module_table(i.trace, i.work, i.ws, i.we)

    @cached_property
    def host(self) -> HostSplit | None:
        """Launching threads' time by cause (GPU traces)."""
        i = self._inputs()
        return None if self.cpu_trace else host_split(i.trace, i.ws, i.we, self.steps)

    @cached_property
    def stream_overlap(self) -> list[StreamOverlap]:
        i = self._inputs()
        return [] if self.cpu_trace else stream_overlap(i.work, i.windows)

    @cached_property
    def efficiency(self) -> Efficiency | None:
        """analyze's Efficiency section (None unless made ``with_efficiency``: ranks skip
        it)."""
        i = self._inputs()
        return efficiency(i.trace, i.peak, self.busy_ns, self.span_ns, self.steps) \
            if i.with_efficiency else None

    @cached_property
    def memory(self) -> Memory | None:
        i = self._inputs()
        return memory(i.trace, i.ws, i.we) if i.with_efficiency else None

    def _inputs(self) -> _Inputs:
        if self.inputs is None:
            raise ValueError("a Summary made without its trace has no lazy sections")
        return self.inputs

    def host_dict(self) -> dict[str, Any] | None:
        """``host`` of ``--json``: the split, and the step per kernel."""
        if self.host is None:
            return None
        return self.host.to_dict() | {"per_kernel_ns": self.host_per_kernel_ns,
                                      "kernels_per_step": self.kernel_count / max(self.steps, 1)}

    def overlap_dicts(self) -> list[dict[str, Any]]:
        """``stream_overlap`` of ``--json``: per device, with the per-step figures and the
        per-stream rows the Streams table prints."""
        per = max(self.steps, 1)
        out = []
        for o in self.stream_overlap:
            d = next(d for d in self.devices if d.device == o.device)
            out.append(o.to_dict() | {
                "per_step": {"multi_stream_ns": o.multi_ns / per, "busy_ns": o.busy_ns / per},
                "streams_per_step": [
                    {"stream": int(r.stream), "work_count": r.work_count / per,
                     "busy_ns": r.busy_ns / per,
                     "share_of_device_busy": r.busy_ns / d.busy_ns if d.busy_ns else None}
                    for r in d.streams.itertuples(index=False)]})
        return out

    @property
    def host_per_kernel_ns(self) -> dict[str, float | None]:
        """A step's time per kernel it ran, timed and profiled: what one device op
        costs end to end when the host sets the pace."""
        t = self.timed
        return {"timed": per_device_op_ns(t.timed_ns if t else None, self.kernel_count,
                                          self.steps),
                "profiled": per_device_op_ns(t.profiled_ns if t else None,
                                             self.kernel_count, self.steps)}

    @property
    def idle_fraction(self) -> float | None:
        """1 - busy / span: every idle moment, whatever its cause."""
        return 1.0 - self.busy_ns / self.span_ns if self.span_ns else None

    @property
    def launch_bound_fraction(self) -> float | None:
        """Host wait / span, over the devices whose launches are in the trace."""
        return None if self.cpu_trace else launch_bound(self.devices)

    @property
    def copy_fraction(self) -> float | None:
        """memcpy and memset time / all device time (None without device rows)."""
        if self.cpu_trace or not self.device_total_ns or not len(self.categories):
            return None
        cats = self.categories.set_index("category")["total_ns"]
        copies = sum(int(cats.get(c, 0)) for c in ("memcpy", "memset"))
        return copies / self.device_total_ns

    @property
    def queued_idle_fraction(self) -> float | None:
        return None if self.queued_idle_ns is None or not self.span_ns \
            else self.queued_idle_ns / self.span_ns

    @property
    def framework_overhead_fraction(self) -> float | None:
        """On a CPU trace: the span not covered by leaf-op work."""
        return self.idle_fraction if self.cpu_trace else None

    def to_dict(self, top: int = 20) -> dict[str, Any]:
        """The ``--json`` object (keys documented in docs/formats.md)."""
        k = self.kernels.head(top)
        rest = self.kernels.iloc[top:]
        lo = self.launches
        return integer_ns({
            "source": {key: self.meta.get(key) for key in
                       ("source_format", "source_file", "profiler", "devices")} | (
                {"device_properties": self.meta["device_properties"]}
                if self.meta.get("device_properties") else {}),
            "trace_type": "cpu" if self.cpu_trace else "gpu",
            "scope": self.scope,
            "steps": self.steps,
            "span_ns": self.span_ns,
            "busy_ns": self.busy_ns,
            "idle_ns": self.span_ns - self.busy_ns,
            "host_wait_ns": self.host_wait_ns,
            "queued_idle_ns": self.queued_idle_ns,
            "trace_busy_ns": self.trace_busy_ns,
            "idle_fraction": self.idle_fraction,
            "launch_bound_fraction": self.launch_bound_fraction,
            "framework_overhead_fraction": self.framework_overhead_fraction,
            "queued_idle_fraction": self.queued_idle_fraction,
            "copy_fraction": self.copy_fraction,
            "devices": [
                {"device": d.device, "span_ns": d.span_ns, "busy_ns": d.busy_ns,
                 "host_wait_ns": d.host_wait_ns, "queued_idle_ns": d.queued_idle_ns,
                 "idle_fraction": d.idle_fraction,
                 "launch_bound_fraction": d.launch_bound_fraction,
                 "queue_depth": {"mean": d.queue_mean, "max": d.queue_max},
                 "work_count": d.work_count}
                for d in self.devices
            ],
            "streams": [plain_row(r) for d in self.devices
                        for r in d.streams.to_dict("records")],
            "kernels": {"count": self.kernel_count, "total_ns": self.kernel_total_ns,
                        "distinct": len(self.kernels), "device_total_ns": self.device_total_ns,
                        "dur_ns": asdict(self.kernel_dur)},
            "launches": {
                "count": lo.kernel.count, "matched": lo.kernel.matched,
                "host_ns": lo.kernel.host_ns, "api_share": lo.kernel.api_share,
                "call_ns": asdict(lo.kernel.call), "delay_ns": asdict(lo.delay),
                "short_kernels": lo.short_kernels,
                "unlaunched_kernels": lo.unlaunched_kernels,
            },
            "copies": {"count": lo.copies.count, "matched": lo.copies.matched,
                       "host_ns": lo.copies.host_ns, "api_share": lo.copies.api_share,
                       "call_ns": asdict(lo.copies.call)},
            "graphs": {"launches": lo.graphs.count, "kernels": lo.graphs.kernels,
                       "kernel_ns": lo.graphs.kernel_ns, "host_ns": lo.graphs.host_ns,
                       "first_kernel_delay_ns": asdict(lo.graphs.first_delay)},
            "categories": {
                r.category: {"count": int(r.count), "total_ns": int(r.total_ns),
                             "share": float(r.share)}
                for r in self.categories.itertuples(index=False)
            },
            "top_kernels": [
                {"name": r.name, **({"config": r.details} if self.by_config else {}),
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
            "casts": {"count": self.casts.count, "total_ns": self.casts.total_ns,
                      "share_of_busy": self.casts.share_of_busy,
                      "cast_ops": self.casts.cast_ops,
                      "top": [{"name": str(r.name), "op": None if r.op != r.op else r.op,
                               "count": int(r.count), "total_ns": int(r.total_ns)}
                              for r in self.casts.top.head(5).itertuples(index=False)]},
            "phases": [plain_row(r) | {"per_step": _per_step_phase(r, self.steps)}
                       for r in self.phases.to_dict("records")],
            "modules": [plain_row(r) | {"per_step": _per_step(r, self.steps, MODULE_FIGURES)}
                        for r in self.modules.to_dict("records")],
            "timings": self.timings.to_dict() if self.timings else None,
            "timed_step": self.timed.to_dict() | {
                "per_kernel_ns": self.host_per_kernel_ns,
                "kernels_per_step": self.kernel_count / max(self.steps, 1)}
            if self.timed else None,
            "host": self.host_dict(),
            "stream_overlap": self.overlap_dicts(),
            **({"efficiency": self.efficiency.to_dict(top=top)} if self.efficiency else {}),
            **({"memory": self.memory.to_dict()} if self.memory else {}),
            "notes": self.notes,
        })


def _per_step_phase(row: dict, steps: int) -> dict[str, float | None]:
    """A phase's figures per step, as ``analyze`` prints them (the whole trace where it has
    no steps), and its busy share of wall time."""
    out = _per_step(row, steps, ("wall_ns", "busy_ns", "kernels", "kernel_ns", "casts",
                                 "cast_ns"))
    out["busy_fraction"] = row["busy_ns"] / row["wall_ns"] if row["wall_ns"] else None
    return out


MODULE_FIGURES = ("calls", "wall_ns", "kernels", "kernel_ns")


def _per_step(row: dict, steps: int, keys: tuple[str, ...]) -> dict[str, float | None]:
    """``keys`` of a row per step (the whole trace's where it has no steps)."""
    per = max(steps, 1)
    return {k: row[k] / per for k in keys}


def integer_ns(obj: Any, key: str = "") -> Any:
    """Every ``*_ns`` value as an integer (medians and means are rounded): docs/formats.md
    promises integer nanoseconds."""
    if isinstance(obj, dict):
        return {k: integer_ns(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [integer_ns(v, key) for v in obj]
    if isinstance(obj, float) and key.endswith("_ns") and obj == obj:
        return int(round(obj))
    return obj


def _sum_known(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def summarize(trace: Trace, by_config: bool = False, with_efficiency: bool = False,
              peak: Any = None) -> Summary:
    """The figures of ``traceviz analyze`` for ``trace``: the totals at once, each section
    (launches, casts, phases, modules, host, streams, efficiency, memory) when first read;
    ``by_config`` splits the kernel table by launch configuration; ``with_efficiency``
    adds the efficiency and memory sections (``peak``: a ``peaks.Peak`` overriding the
    device's row)."""
    work = work_rows(trace)
    windows = analysis_windows(trace, work)
    devices = idle_breakdown(trace, work, windows)
    steps = max((int((w["step"] >= 0).sum()) for w in windows.values()), default=0)
    kernels_only = work if trace.is_cpu else work[work["kind"] == "kernel"]
    notes = [str(n) for n in trace.meta.get("notes") or []]  # what the parser dropped
    if trace.is_cpu:
        notes.append("CPU trace: no device rows; leaf framework ops play the kernels.")
    if trace.is_cpu and (trace.events["kind"] == "runtime").any():
        notes.append("The trace has CUDA/HIP runtime calls but no device rows: GPU activity "
                     "was not recorded (e.g. a CUPTI counter session).")
    if not len(work):
        notes.append("The trace has no kernels and no framework ops to analyze.")
    unknown = [d.device for d in devices if d.host_wait_ns is None]
    if not trace.is_cpu and unknown:
        notes.append("No launch call of device(s) " + ", ".join(map(str, unknown))
                     + " is in the trace: their idle time cannot be split into host wait "
                     "and queued idle.")
    whole_busy = trace_busy_ns(work)
    ws, we = wall_windows(windows)
    span_ns = sum(d.span_ns for d in devices)
    busy_ns = sum(d.busy_ns for d in devices)
    run_timings = timings(trace.meta.get("bench"))
    return Summary(
        meta=trace.meta,
        cpu_trace=trace.is_cpu,
        scope="steps" if steps else "trace",
        steps=steps,
        span_ns=span_ns,
        busy_ns=busy_ns,
        trace_busy_ns=whole_busy,
        host_wait_ns=None if trace.is_cpu else host_wait_total(devices),
        queued_idle_ns=None if trace.is_cpu
        else _sum_known([d.queued_idle_ns for d in devices]),
        devices=devices,
        kernels=kernel_table(kernels_only, by_config=by_config),
        kernel_count=len(kernels_only),
        kernel_total_ns=int(kernels_only["dur_ns"].sum()),
        device_total_ns=int(work["dur_ns"].sum()),
        categories=category_table(work),
        kernel_dur=Distribution.of(kernels_only["dur_ns"].to_numpy()),
        timings=run_timings,
        timed=timed_step(run_timings, span_ns, busy_ns, steps, len(devices)),
        by_config=by_config,
        notes=notes,
        inputs=_Inputs(trace, work, windows, ws, we, with_efficiency, peak),
    )
