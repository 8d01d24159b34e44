"""What bounds the step: the one verdict every command gives (``analyze``'s header and
``--json``, ``advise``, which puts the finding that names it first, ``whatif``, the report).

Every moment of a device's windows has one cause (``summary/waits.py``): start-up (a
context made, modules loaded, autotuning), the device's own work (busy), the host asking
for its next batch (input), launched work waiting (queued: a stream wait, a collective)
or the host (the device waits for it, for whatever reason the host split names).
Exposed communication (collectives no computation overlaps) is busy time that waits for
other ranks. The verdict is taken on the windows that show the steady pace
(``budget.py``): cold step windows are left out where steady ones remain; without steps,
start-up is taken out. In this order:

- ``unknown``: launches but no kernel records (the trace was taken without CUDA/HIP
  activity): the device's time is not in the trace;
- ``startup``: every step window that ran device work is cold; or, without steps, the
  windows' time besides start-up is under ``STEADY_MIN`` of the windows and the start-up
  (with the start-up recorded before the first window, where a context may have been
  made): the trace shows the program starting, not its steps;
- ``input``: the device idles inside input calls >= ``INPUT_SHARE`` of the steady span
  and at least as long as it waits for the host otherwise;
- ``communication``: exposed >= ``COMM_SHARE`` of the span and more than the host time;
- ``host``: the host time >= ``HOST_SHARE`` of the span, unless the run's timed step (no
  profiler) leaves the host less than ``HOST_SHARE`` of it: the device's busy time per
  step is the same without the profiler, so a timed step hardly longer than it has no
  room for a host bound (the profiled host wait was the profiler's own). Its ``cause`` is
  the largest host group (``budget.HOST_GROUPS``): issuing work, untraced host work, the
  OS (sleep, I/O, locks), synchronous copies, synchronizations, allocation;
- ``device``: otherwise; the device's own work sets the pace (a CPU trace: the CPU ops
  of the host threads, in CPU words: ``Bound.cpu``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from traceviz.analyses.summary.budget import Budget, budget, cold_windows
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.units import fmt_ns, fmt_pct

if TYPE_CHECKING:  # types only: figures.py imports the registry, which imports this
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace

INPUT_SHARE = 0.10   # the device idle for input: a tenth of the step is worth its remedy
COMM_SHARE = 0.25
HOST_SHARE = 0.25    # as advice.host's HOST_BOUND: the same threshold, one verdict
# the windows' time besides start-up, as a share of the recorded time, that shows a
# steady pace to judge: less, and the trace records start-up, not steps
STEADY_MIN = 0.25
BOUND_TITLES = {"input": "the input pipeline", "host": "the host",
                "device": "the device's own work", "communication": "communication",
                "startup": "start-up (the trace records the program starting)",
                "unknown": "unknown"}
# a CPU trace (no device rows): the host threads' CPU ops do the work
CPU_TITLES = {"device": "the CPU ops' own work on the host threads",
              "host": "framework overhead on the host threads"}
CAUSE_WORDS = {"launch": "issuing its work (launch calls, framework ops, Python between "
                         "them)",
               "untraced": "work the profiler did not record",
               "os": "sleeping, I/O or locks (off the CPU)",
               "sync_copy": "synchronous copies",
               "sync": "synchronizing calls",
               "alloc": "allocating memory and creating streams or events"}


@dataclass(frozen=True)
class Bound:
    by: str                      # input | host | device | communication | startup | unknown
    share: float | None          # the cause's share of the span
    why: str
    figures: dict[str, Any] = field(default_factory=dict)
    cause: str | None = None     # host: the largest host group (budget.HOST_GROUPS)
    # what the verdict was taken on: "steady steps", "windows less start-up", "windows"
    scope: str = "windows"
    steady: Budget | None = None  # the sums it was taken on (None: no host-wait split)
    cpu: bool = False            # a CPU trace: the verdict in CPU words (``CPU_TITLES``)

    @property
    def title(self) -> str:
        """The verdict in words, the host's cause with it: what every output prints."""
        if self.by == "host" and self.cause:
            return f"the host, {CAUSE_WORDS.get(self.cause, self.cause)}"
        if self.cpu and self.by in CPU_TITLES:
            return CPU_TITLES[self.by]
        return BOUND_TITLES.get(self.by, self.by)

    def to_dict(self) -> dict[str, Any]:
        return {"by": self.by, "cause": self.cause, "title": self.title,
                "share": self.share, "why": self.why,
                "scope": self.scope, "figures": self.figures,
                "steady": None if self.steady is None else self.steady.to_dict()}


def exposed_communication(s: Summary) -> tuple[int, int]:
    """(communication time, the part no computation kernel overlaps), inside the
    windows, summed over devices: the communication section's figures."""
    c = s.communication if not s.cpu_trace else None
    return (0, 0) if c is None else (c.comm_ns, c.exposed_ns)


def step_bound(trace: Trace, s: Summary) -> Bound:
    """The verdict on ``trace`` from its summary ``s``."""
    if trace.kernel_activity_missing:
        launches = trace.kernel_launch_calls
        return Bound("unknown", None, f"{launches:,} kernel launches, no kernel records: "
                     "the device's time is not in the trace",
                     {"launches": launches, "kernels": 0})
    span = s.span_ns
    if not span:
        return Bound("unknown", None, "nothing to judge: the windows are empty")
    if s.cpu_trace:
        return _cpu_bound(s)
    w = s.host_wait_split
    comm = s.communication
    if w is None:  # no launch of any device in the trace: the idle cannot be split
        whole = Budget(0, s.busy_ns, 0, s.queued_idle_ns or 0,
                       max(span - s.busy_ns - (s.queued_idle_ns or 0), 0),
                       exposed_communication(s)[1])
        return _steady(s, whole, "windows", {})
    cold = cold_windows(w, bool(s.steps))
    if cold.any():
        # a steady step shows the pace only where the device ran work in it
        steady = ~cold & (w.steps["busy_ns"].to_numpy(np.int64) > 0)
        if steady.any():
            kept = budget(w, comm, steady)
            return _steady(s, kept, "steady steps", _startup_figures(w, cold))
        return _startup(s, budget(w, comm), cold, "every step window that ran device work "
                        "holds start-up")
    whole = budget(w, comm)
    # start-up recorded before the first window counts (a context made before the first
    # launch is the trace's start-up too), not the time before it that is not start-up
    start_up = whole.startup_ns + w.before_ns
    held = whole.span_ns + start_up
    recorded = whole.span_ns + whole.startup_ns + w.before_span_ns
    # the steady part: what the windows hold besides start-up; too little of it to judge,
    # and the trace is of start-up (else its verdict, with start-up shown apart)
    if held and start_up and whole.span_ns < STEADY_MIN * held:
        return _startup(s, whole, cold, f"start-up takes {fmt_ns(start_up)} of the "
                        f"{fmt_ns(recorded)} recorded; the windows hold "
                        f"{fmt_ns(whole.span_ns)} besides it "
                        f"({fmt_pct(whole.span_ns / held)} of the windows and start-up), too "
                        "little steady work to judge")
    return _steady(s, whole, "windows less start-up" if whole.startup_ns else "windows",
                   _startup_figures(w, cold))


def _startup_figures(w: Any, cold: Any) -> dict[str, Any]:
    b = budget(w, None)
    return {"startup_ns": b.startup_ns + w.before_ns, "startup_before_ns": w.before_ns,
            "cold_windows": int(cold.sum())}


def _startup(s: Summary, whole: Budget, cold: Any, why: str) -> Bound:
    """The verdict ``startup``, with what the rest of the windows would read as."""
    w = s.host_wait_split
    assert w is not None  # a start-up verdict is made from the split
    figures = _startup_figures(w, cold)
    rest = _steady(s, whole, "windows less start-up", {})
    figures = rest.figures | figures | {"rest": rest.by, "rest_cause": rest.cause,
                "parts": w.startup.to_dict()["parts"]}
    recorded = whole.span_ns + whole.startup_ns + w.before_span_ns
    return Bound("startup", figures["startup_ns"] / recorded if recorded else None, why,
                 figures, None, "recorded time", whole)


def _cpu_bound(s: Summary) -> Bound:
    span = s.span_ns
    p = s.input_pipeline
    input_idle = p.idle_ns if p is not None else 0
    if input_idle >= INPUT_SHARE * span:
        return Bound("input", input_idle / span,
                     f"the step waits for its input {fmt_pct(input_idle / span)} of "
                     "the span", {"input_idle_ns": input_idle}, cpu=True)
    share = s.framework_overhead_fraction or 0.0
    if share >= HOST_SHARE:
        return Bound("host", share, f"{fmt_pct(share)} of the span is framework time "
                     "outside the CPU ops", {"overhead_fraction": share}, cpu=True)
    return Bound("device", s.busy_ns / span, f"the CPU ops fill "
                 f"{fmt_pct(s.busy_ns / span)} of the span", {"busy_ns": s.busy_ns},
                 cpu=True)


def _steady(s: Summary, b: Budget, scope: str, extra: dict[str, Any]) -> Bound:
    """input, communication, host or device, on the sums ``b``."""
    span = b.span_ns
    comm, _ = exposed_communication(s)
    figures = {"span_ns": span, "busy_ns": b.busy_ns, "input_idle_ns": b.input_ns,
               "host_ns": b.host_ns, "queued_idle_ns": b.queued_ns,
               "communication_ns": comm, "exposed_communication_ns": b.exposed_ns,
               "host_groups": b.groups, **extra}
    # start-up is named where it was taken out and mattered (a percent of the windows)
    where = "" if scope == "windows" or (scope == "windows less start-up" and b.startup_ns
                                          < 0.01 * (span + b.startup_ns)) else \
        " of the steady steps" if scope == "steady steps" else " outside start-up"
    if not span:
        return Bound("startup", None, "the windows hold start-up only", figures, None,
                     scope, b)
    if b.input_ns >= INPUT_SHARE * span and b.input_ns >= b.host_ns:
        return Bound("input", b.share(b.input_ns),
                     f"the device idles {fmt_pct(b.share(b.input_ns))} of the span{where} "
                     f"while the host waits for its next batch ({fmt_ns(b.input_ns)}), "
                     f"more than it waits for the host otherwise ({fmt_ns(b.host_ns)})",
                     figures, None, scope, b)
    if b.exposed_ns >= COMM_SHARE * span and b.exposed_ns > b.host_ns:
        return Bound("communication", b.share(b.exposed_ns),
                     f"communication no computation overlaps takes "
                     f"{fmt_pct(b.share(b.exposed_ns))} of the span{where} "
                     f"({fmt_ns(b.exposed_ns)})", figures, None, scope, b)
    timed = s.timed
    # the step a user pays is the timed one: the device's busy time per step is the same
    # without the profiler, so at most (timed - busy) of it is left for the host to cost
    room = None
    if timed is not None and timed.known and timed.timed_ns:
        room = max(timed.timed_ns - timed.device_ns, 0.0) / timed.timed_ns
        figures["timed_step_ns"] = timed.timed_ns
        figures["timed_host_room"] = room
    host_gone = room is not None and room < HOST_SHARE
    if b.host_ns >= HOST_SHARE * span and not host_gone:
        cause = b.cause
        return Bound("host", b.share(b.host_ns),
                     f"the device waits for the host {fmt_pct(b.share(b.host_ns))} of the "
                     f"span{where} ({fmt_ns(b.host_ns)}, input calls left out)", figures,
                     cause,
                     scope, b)
    why = f"the device is busy {fmt_pct(b.share(b.busy_ns))} of the span{where}"
    if (s.copy_fraction or 0) >= 0.5:  # busy with copies, not computation: say so
        why += f", {fmt_pct(s.copy_fraction)} of its time in copies"
    known = timed is not None and timed.timed_ns is not None and host_gone
    if known and timed is not None and timed.timed_ns:
        why = (f"the device is busy {fmt_ns(timed.device_ns)} of the "
               f"{fmt_ns(timed.timed_ns)} timed step (no profiler): at most "
               f"{fmt_pct(room)} of it is left for the host; the profiled step's host wait "
               f"({fmt_pct(b.share(b.host_ns))} of its span) is mostly the profiler's own")
    share = timed.device_ns / timed.timed_ns \
        if known and timed is not None and timed.timed_ns else b.share(b.busy_ns)
    return Bound("device", min(share, 1.0), why, figures, None, scope, b)


def _compute(i: Inputs, s: Summary) -> Bound:
    return step_bound(i.trace, s)


def _json(s: Summary, top: int) -> dict[str, Any]:
    return {"bound": s.bound.to_dict()}


SECTION = Section(_json, _compute)
