"""What bounds the step: the one verdict ``advise`` opens with, and the finding that names
it goes first.

The step's time splits into the device busy and the device idle; the idle has a cause:
the host asking for its next batch (the input pipeline), the host between launches
(Python, the framework, the launch calls), or the device waiting on something launched
(queued: a stream wait, a collective). Exposed communication (collectives no computation
kernel overlaps) is busy time that waits for other ranks. The verdict is the biggest
cause over its threshold, in this order:

- ``unknown``: launches but no kernel records (the trace was taken without CUDA/HIP
  activity): the device's time is not in the trace;
- ``input``: the device idles inside input calls >= ``INPUT_SHARE`` of the span and at
  least as long as it idles waiting for launches;
- ``communication``: exposed communication >= ``COMM_SHARE`` of the span and more than
  the launch wait;
- ``host``: the device waits for launches (idle, nothing pending, outside input calls)
  >= ``HOST_SHARE`` of the span, unless the run's timed step (no profiler) leaves the
  host less than ``HOST_SHARE`` of it: the device's busy time per step is the same
  without the profiler, so a timed step hardly longer than it has no room for a host
  bound (the profiled host wait was the profiler's own);
- ``device``: otherwise; the device's own work sets the pace (a CPU trace: the ops).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from traceviz.analyses.advice.base import Finding
from traceviz.analyses.advice.runs import run_uses
from traceviz.units import fmt_ns, fmt_pct

if TYPE_CHECKING:  # the rules take it; engine.py makes it from the rules' registry
    from traceviz.analyses.advice.engine import Context

INPUT_SHARE = 0.10   # the device idle for input: a tenth of the step is worth its remedy
COMM_SHARE = 0.25
HOST_SHARE = 0.25    # as advice.host's HOST_BOUND: the same threshold, one verdict
BOUND_RULES = {"input": ("input_pipeline",), "host": ("host_bound",),
               "unknown": ("no_kernel_activity",), "communication": ("communication",),
               "device": ("device_bound",)}


@dataclass(frozen=True)
class Bound:
    by: str                      # input | host | device | communication | unknown
    share: float | None          # the cause's share of the span
    why: str
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"by": self.by, "share": self.share, "why": self.why, "figures": self.figures}


def exposed_communication(ctx: Context) -> tuple[int, int]:
    """(communication time, the part no computation kernel overlaps), inside the
    windows, summed over devices: the communication section's figures."""
    c = ctx.summary.communication if not ctx.summary.cpu_trace else None
    return (0, 0) if c is None else (c.comm_ns, c.exposed_ns)


def step_bound(ctx: Context) -> Bound:
    s = ctx.summary
    if ctx.trace.kernel_activity_missing:
        launches = ctx.trace.kernel_launch_calls
        return Bound("unknown", None, f"{launches:,} kernel launches, no kernel records: "
                     "the device's time is not in the trace",
                     {"launches": launches, "kernels": 0})
    span = s.span_ns
    if not span:
        return Bound("unknown", None, "nothing to judge: the windows are empty")
    p = s.input_pipeline
    input_idle = p.idle_ns if p is not None else 0
    if s.cpu_trace:
        if input_idle >= INPUT_SHARE * span:
            return Bound("input", input_idle / span,
                         f"the step waits for its input {fmt_pct(input_idle / span)} of "
                         "the span", {"input_idle_ns": input_idle})
        share = s.framework_overhead_fraction or 0.0
        if share >= HOST_SHARE:
            return Bound("host", share, f"{fmt_pct(share)} of the span is framework time "
                         "outside the work ops", {"overhead_fraction": share})
        return Bound("device", s.busy_ns / span, f"the work ops fill "
                     f"{fmt_pct(s.busy_ns / span)} of the span", {"busy_ns": s.busy_ns})
    launch_wait = max((s.host_wait_ns or 0) - input_idle, 0)
    comm, exposed = exposed_communication(ctx)
    figures = {"span_ns": span, "busy_ns": s.busy_ns, "input_idle_ns": input_idle,
               "launch_wait_ns": launch_wait, "queued_idle_ns": s.queued_idle_ns or 0,
               "communication_ns": comm, "exposed_communication_ns": exposed}
    if input_idle >= INPUT_SHARE * span and input_idle >= launch_wait:
        return Bound("input", input_idle / span,
                     f"the device idles {fmt_pct(input_idle / span)} of the span while the "
                     f"host waits for its next batch ({fmt_ns(input_idle)}), more than it "
                     f"waits for launches ({fmt_ns(launch_wait)})", figures)
    if exposed >= COMM_SHARE * span and exposed > launch_wait:
        return Bound("communication", exposed / span,
                     f"communication no computation overlaps takes {fmt_pct(exposed / span)}"
                     f" of the span ({fmt_ns(exposed)})", figures)
    timed = ctx.timed
    # the step a user pays is the timed one: the device's busy time per step is the same
    # without the profiler, so at most (timed - busy) of it is left for the host to cost
    room = None
    if timed is not None and timed.known and timed.timed_ns:
        room = max(timed.timed_ns - timed.device_ns, 0.0) / timed.timed_ns
        figures["timed_step_ns"] = timed.timed_ns
        figures["timed_host_room"] = room
    host_gone = room is not None and room < HOST_SHARE
    if launch_wait >= HOST_SHARE * span and not host_gone:
        return Bound("host", launch_wait / span,
                     f"the device waits for launches {fmt_pct(launch_wait / span)} of the "
                     f"span ({fmt_ns(launch_wait)}, input calls left out)", figures)
    why = f"the device is busy {fmt_pct(s.busy_ns / span)} of the span"
    known = timed is not None and timed.timed_ns is not None and host_gone
    if known and timed is not None and timed.timed_ns:
        why = (f"the device is busy {fmt_ns(timed.device_ns)} of the "
               f"{fmt_ns(timed.timed_ns)} timed step (no profiler): at most "
               f"{fmt_pct(room)} of it is left for the host; the profiled step's host wait "
               f"({fmt_pct(launch_wait / span)} of its span) is mostly the profiler's own")
    share = timed.device_ns / timed.timed_ns \
        if known and timed is not None and timed.timed_ns else s.busy_ns / span
    return Bound("device", min(share, 1.0), why, figures)


def _top_categories(ctx: Context, n: int = 3) -> str:
    cats = ctx.summary.categories
    if cats is None or not len(cats):
        return ""
    total = float(cats["total_ns"].sum()) or 1.0
    top = cats.sort_values("total_ns", ascending=False).head(n)
    return ", ".join(f"{c} {fmt_pct(t / total)}" for c, t in
                     zip(top["category"].astype(str), top["total_ns"], strict=True))


def device_bound(ctx: Context) -> Finding | None:
    """The verdict ``device``: the device's own work sets the pace; what it spends its
    time on, so that the findings after it (precision, fusion, shapes) read in order."""
    b = ctx.bound
    if b.by != "device":
        return None
    s = ctx.summary
    unit = "work ops" if s.cpu_trace else "kernels"
    evidence = [b.why]
    if top := _top_categories(ctx):
        evidence.append(f"{unit} by category: {top}")
    if said := run_uses(ctx).said(ctx.steps):
        evidence.append(said)
    if len(s.kernels):
        k = s.kernels.iloc[0]
        evidence.append(f"the longest: {str(k['name'])[:90]} ({fmt_ns(int(k['total_ns']))}, "
                        f"{int(k['count']):,} calls)")
    return Finding(
        "device_bound", "Device-bound: the step is as long as its device work"
        if not s.cpu_trace else "Compute-bound: the step is as long as its work ops",
        evidence,
        f"make the {unit} faster or fewer: the findings below and `traceviz analyze` "
        "(the efficiency section holds each op group against the device's peak) say "
        "which; a faster host or fewer launches will not shorten this step",
        None, None, {"busy_share": b.share})

