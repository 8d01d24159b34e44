"""Everything ``traceviz analyze`` reports: the totals in one dataclass, every other figure
in a registered section (``registry.py``), computed when first read; a stable JSON form
assembled from the sections in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from traceviz.analyses.stats import Distribution
from traceviz.analyses.summary.host_split import per_device_op_ns
from traceviz.analyses.summary.idle_breakdown import (
    Idle,
    host_wait_total,
    idle_breakdown,
    launch_bound,
)
from traceviz.analyses.summary.kernel_time import category_table, kernel_table
from traceviz.analyses.summary.protocol import Inputs
from traceviz.analyses.summary.registry import Sections, section, sections
from traceviz.analyses.timed import TimedStep, timed_step
from traceviz.analyses.timings import Timings
from traceviz.analyses.timings import run_timings as run_timings_of
from traceviz.analyses.work import (
    analysis_windows,
    trace_busy_ns,
    wall_windows,
    work_rows,
)
from traceviz.table.meta import TraceMeta
from traceviz.table.schema import is_in

if TYPE_CHECKING:
    from traceviz.trace import Trace


@dataclass
class Summary(Sections):
    """The figures of ``analyze``: the totals as fields, computed at once by ``summarize``;
    every other figure a section (``registry.py``), read as ``summary.<key>`` (typed by its
    ``compute``), computed when first read."""

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
    # kernel launches without kernel records: the device's time is unknown
    kernel_activity_missing: bool = False
    # no work rows but user ranges (an export of NVTX ranges alone): the Ranges section
    # is the summary; no kernel tables, no efficiency
    ranges_only: bool = False
    # what the lazy sections are computed from, when first read
    inputs: Inputs | None = field(default=None, repr=False, compare=False)

    def section_json(self, key: str, top: int = 20) -> dict[str, Any]:
        """One section's part of ``--json`` (its keys, before ``integer_ns``)."""
        return section(key).json(self, top)

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
        """The ``--json`` object (keys documented in docs/formats.md): every registered
        section's part, in the registry's order (reading each lazy one)."""
        out: dict[str, Any] = {}
        for s in sections():
            part = s.json(self, top)
            # a key the section did not declare could overwrite another section's
            if stray := [k for k in part if k not in s.json_keys]:
                raise ValueError(f"section {s.key!r} gave {', '.join(stray)}, not among its "
                                 "keys")
            out |= part
        return integer_ns(out)


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
              peak: Any = None, windows: dict | None = None) -> Summary:
    """The figures of ``traceviz analyze`` for ``trace``: the totals at once, each section
    (launches, casts, phases, modules, host, streams, efficiency, memory) when first read;
    ``by_config`` splits the kernel table by launch configuration; ``with_efficiency``
    adds the efficiency and memory sections (``peak``: a ``peaks.Peak`` overriding the
    device's row; ``windows``: the trace's analysis windows where the caller has them)."""
    work = work_rows(trace)
    windows = analysis_windows(trace, work) if windows is None else windows
    devices = idle_breakdown(trace, work, windows)
    steps = max((int((w["step"] >= 0).sum()) for w in windows.values()), default=0)
    kernels_only = work if trace.is_cpu else work[work["kind"] == "kernel"]
    notes = [str(n) for n in trace.meta.get("notes") or []]  # what the parser dropped
    if trace.is_cpu:
        notes.append("CPU trace: no device rows; the host threads' CPU ops (leaf framework ops) "
                     "play the kernels.")
    if trace.is_cpu and (trace.events["kind"] == "runtime").any():
        notes.append("The trace has CUDA/HIP runtime calls but no device rows: GPU activity "
                     "was not recorded (e.g. a CUPTI counter session).")
    # launches without kernel records are not a ranges-only trace: the device ran work
    # the profiler did not record (the kernel_activity section says so)
    ranges_only = not len(work) and not trace.kernel_activity_missing and (bool(
        is_in(trace.events["kind"], "annotation", "step").any())
        or trace.nvtx_ranges is not None)
    if ranges_only:
        # nothing runs that an efficiency or a replay could read: skip them
        with_efficiency = False
        notes.append("The trace holds user ranges only (no kernels, no framework ops): "
                     "the Ranges section is its summary.")
    elif not len(work) and not trace.kernel_activity_missing:  # that section says it
        notes.append("The trace has no kernels and no framework ops to analyze.")
    if ranges_only and trace.is_cpu:
        notes.remove("CPU trace: no device rows; the host threads' CPU ops (leaf framework ops) "
                     "play the kernels.")
    unknown = [d.device for d in devices if d.host_wait_ns is None]
    if not trace.is_cpu and unknown:
        notes.append("No launch call of device(s) " + ", ".join(map(str, unknown))
                     + " is in the trace: their idle time cannot be split into host wait "
                     "and queued idle.")
    whole_busy = trace_busy_ns(work)
    ws, we = wall_windows(windows)
    span_ns = sum(d.span_ns for d in devices)
    busy_ns = sum(d.busy_ns for d in devices)
    run_timings = run_timings_of(trace, windows)
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
        kernel_activity_missing=trace.kernel_activity_missing,
        ranges_only=ranges_only,
        inputs=Inputs(trace, work, windows, ws, we, with_efficiency, peak),
    )
