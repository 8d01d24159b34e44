"""The host's time by cause, the step per kernel, the profiled and timed step and the
streams' overlap, as ``analyze`` prints them (header rows and the Streams table)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from traceviz.analyses.summary import collectives, waits
from traceviz.analyses.summary import stream_overlap as overlap
from traceviz.analyses.summary.figures import Summary
from traceviz.render.terminal.fit import Col, fitted_table
from traceviz.render.terminal.page import Page, section_render
from traceviz.units import fmt_bytes, fmt_ns, fmt_pct

if TYPE_CHECKING:
    import pandas as pd


@section_render(overlap.SECTION)
def streams(s: Summary, page: Page) -> None:
    """The Streams table, where a device ran work on two or more streams (GPU traces)."""
    if not s.cpu_trace and any(o.streams >= 2 for o in s.stream_overlap):
        page.add_fitted("streams", streams_table(s, page.width))


def streams_table(s: Summary, width: int) -> tuple[Table, list[str]]:
    """Per stream: its work and busy time, per step; the overlap line per device."""
    per = max(s.steps, 1)
    rows = []
    for d in s.devices:
        busy = d.busy_ns or 1
        for r in d.streams.sort_values("busy_ns", ascending=False).itertuples(index=False):
            rows.append([f"{d.device}", f"{r.stream}", f"{r.work_count / per:,.0f}",
                         fmt_ns(r.busy_ns / per), fmt_pct(r.busy_ns / busy)])
    unit = "per step" if s.steps else "in the trace"
    caption = "; ".join(
        f"device {o.device}: {fmt_ns(o.multi_ns / per)} {unit} with two or more streams "
        f"busy, {fmt_pct(o.overlap_fraction)} of busy time"
        + ((f" — the streams{_with_kernels(o)} never overlap: their work runs one stream "
            "at a time" if not o.kernel_multi_ns else f" — the streams{_with_kernels(o)} "
            "barely overlap: their work runs one stream at a time almost always")
           if o.never_overlaps else f", at most {o.max_streams} at once")
        + _copies_only(o)
        for o in s.stream_overlap if o.streams >= 2)
    return fitted_table(f"Streams ({unit})", (
        Col("device", "left"), Col("stream", "left"), Col("device ops"), Col("busy"),
        Col("share of\ndevice busy", drop=1)), rows, width, caption=caption)


def _with_kernels(o) -> str:
    """" that ran kernels" where some of the device's streams held copies alone."""
    return " that ran kernels" if o.kernel_streams < o.streams else ""


def _copies_only(o) -> str:
    """Which of a device's streams held copies alone (they are not judged for overlap)."""
    n = o.streams - o.kernel_streams
    return "" if n <= 0 else f" ({n} of the {o.streams} held copies alone)"


def step_line(s: Summary) -> str:
    """The profiled step beside the timed one, or why there is none."""
    t = s.timed
    if t is None:
        return "no steps: figures are profiled, over the whole trace"
    text = f"{fmt_ns(t.profiled_ns)} profiled"
    if not t.known:
        return text + " (no timed step in this trace: every figure is profiled time)"
    if t.steady_ns is not None:
        text += f" ({fmt_ns(t.steady_ns)} steady: the profiler's start-up step left out)"
    return (f"{text} · {fmt_ns(t.timed_ns)} timed (median, no profiler) · profiler "
            f"overhead {t.overhead_text}: the figures below are profiled")


def host_rows(s: Summary) -> list[tuple[str, str]]:
    """The launching thread's time by cause, streams and their overlap, and the step's
    time per kernel."""
    rows = []
    main = s.host.main if s.host is not None else None
    per = max(s.steps, 1)
    unit = "per step" if s.steps else "in the trace"
    if main is not None and main["window_ns"]:
        w = main["window_ns"]
        rows.append((f"host {unit}", ", ".join(
            f"{label} {fmt_ns(main[key] / per)} ({fmt_pct(main[key] / w)})"
            for label, key in (("API calls", "api_ns"), ("framework ops", "op_ns"),
                               ("OS calls and off the CPU", "os_ns"),
                               ("between ops", "between_ns"))
            if key != "os_ns" or main[key])
            + f" (thread {main['tid']}; between ops: "
              f"{s.host.between_what if s.host is not None else 'Python'}, anything "
              "unrecorded)"))
        if main["sync_ns"]:
            rows.append(("  of the API calls", f"{fmt_ns(main['sync_ns'] / per)} in "
                                               "synchronizing calls: the host waiting for "
                                               "the device, not host work"))
        apis = s.host.apis.head(3) if s.host is not None else None
        if apis is not None and len(apis):
            rows.append(("top API calls", ", ".join(
                f"{r.name} {fmt_ns(r.total_ns / per)} ({_count(r.calls / per)})"
                for r in apis.itertuples(index=False)) + f" {unit}"
                + (f", thread {main['tid']} alone"
                   if s.host is not None and len(s.host.threads) > 1 else "")))
    k = s.host_per_kernel_ns
    if k["profiled"] is not None:
        timed = f"{fmt_ns(k['timed'])} timed, " if k["timed"] is not None else ""
        what = "CPU op" if s.cpu_trace else "kernel"
        rows.append((f"step per {what}", f"{timed}{fmt_ns(k['profiled'])} profiled "
                                         f"({s.kernel_count / per:,.0f} {what}s per step)"))
    for o in s.stream_overlap:
        if o.streams < 2:
            continue
        verdict = (" — never overlap" if not o.kernel_multi_ns else " — barely overlap") \
            if o.never_overlaps else ""
        ran = f"{o.streams} ran work" + (
            f" ({o.kernel_streams} with kernels, {o.streams - o.kernel_streams} copies alone)"
            if o.kernel_streams < o.streams else "")
        rows.append((f"streams, device {o.device}",
                     f"{ran}; {fmt_ns(o.multi_ns / per)} {unit} with 2+ busy "
                     f"({fmt_pct(o.overlap_fraction)} of busy){verdict}"))
    return rows


def _count(x: float) -> str:
    """A count per step: whole where it is, else with one decimal under 10."""
    return f"{x:,.0f}" if x == int(x) or x >= 10 else f"{x:.1f}"


@section_render(collectives.SECTION)
def communication(s: Summary, page: Page) -> None:
    """The Communication table: collectives by kind, their messages and bandwidth, and
    the time no computation hides."""
    c = s.communication
    if c is not None:
        page.add_fitted("communication", communication_table(s, page.width))


def communication_table(s: Summary, width: int) -> tuple[Table, list[str]]:
    c = s.communication
    assert c is not None
    rows = []
    for r in c.kinds.itertuples(index=False):
        sized = r.sized > 0
        rows.append([str(r.kind), f"{r.count:,}", fmt_ns(r.total_ns),
                     fmt_bytes(r.bytes) if sized else "-",
                     str(r.dtype) or "-", f"{r.group}" if r.group > 0 else "-",
                     f"{r.algbw_gbs:,.2f} GB/s" if sized and r.algbw_gbs == r.algbw_gbs
                     else "-",
                     f"{r.busbw_gbs:,.2f} GB/s" if sized and r.busbw_gbs == r.busbw_gbs
                     else "-",
                     fmt_pct(r.link_fraction) if r.link_fraction == r.link_fraction
                     and r.link_fraction is not None else "-"])
    if c.host:
        caption = "the host's records of each collective (a CPU backend): no overlap figures"
    else:
        caption = (f"{fmt_ns(c.exposed_ns)} of {fmt_ns(c.comm_ns)} exposed (no computation "
                   f"kernel overlaps it), {fmt_pct(c.overlap_fraction)} overlapped"
                   + (f"; link: {c.link_gbs:,.0f} GB/s one direction ({c.link_source})"
                      if c.link_gbs else ""))
    return fitted_table("Communication", (
        Col("kind", "left"), Col("count"), Col("time"), Col("message\nbytes"),
        Col("dtype", "left", drop=3), Col("ranks", drop=3), Col("algbw", drop=2),
        Col("busbw", drop=1), Col("busbw of\nlink", drop=1)), rows, width, caption=caption)


# the host wait's causes as a reader says them (summary/waits.py CAUSES)
WAIT_LABELS = {"startup": "start-up", "input": "input calls", "launch": "launch calls",
               "ops": "framework ops", "gaps": "untraced, under 1 ms (between ops)",
               "untraced": "untraced, 1 ms or more", "sync_copy": "synchronous copies",
               "sync": "synchronizing calls", "alloc": "allocation",
               "setup": "set-up and attribute queries",
               "create": "stream and event creation", "other_api": "other runtime calls",
               "sleep": "sleep", "io": "I/O", "lock": "locks", "other_os": "other OS calls",
               "offcpu": "off the CPU (scheduled out)"}


def _label(s: Summary, cause: str) -> str:
    """A cause as the reader says it; time between ops named by what runs there."""
    if cause in ("gaps", "untraced"):
        what = s.host.between_what if s.host is not None else "untraced"
        more = "under 1 ms each" if cause == "gaps" else "1 ms or more each"
        return f"{what} between calls ({more}, untraced)" if what != "untraced" else \
            WAIT_LABELS[cause]
    return WAIT_LABELS.get(cause, cause)


def wait_line(s: Summary) -> str:
    """The host wait and its three largest causes."""
    w = s.host_wait_split
    text = fmt_ns(s.host_wait_ns)
    if w is None or not s.host_wait_ns:
        return text
    causes = sorted(((ns, c) for c, ns in w.causes.items() if ns), reverse=True)[:3]
    return text + ": " + ", ".join(f"{_label(s, c)} {fmt_ns(ns)}" for ns, c in causes)


def _first_per_cause(table: pd.DataFrame) -> dict[str, Any]:
    """A cause's first row of ``table`` (a named tuple), per cause."""
    first = table.drop_duplicates("cause")
    return dict(zip(first["cause"].tolist(), first.itertuples(index=False), strict=True))


@section_render(waits.SECTION)
def host_wait(s: Summary, page: Page) -> None:
    """The Host wait table: the device idle with nothing pending, by what the host did."""
    w = s.host_wait_split if not s.cpu_trace else None
    if w is None or not s.host_wait_ns:
        return
    per = max(s.steps, 1)
    unit = "per step" if s.steps else "in the trace"
    causes = w.causes
    total = sum(causes.values()) or 1
    # each cause's first row (the tables run by cause, most first), looked up, not a
    # filtered frame per cause
    names, ranges = (_first_per_cause(t) for t in (w.names, w.ranges))
    rows = []
    for cause, ns in sorted(causes.items(), key=lambda kv: -kv[1]):
        if not ns:
            continue
        # the one name that took it most, its figure in a column of its own (a name may
        # be shortened to fit; a figure never is)
        top = names.get(cause)
        rng = ranges.get(cause)
        rows.append([_label(s, cause), fmt_ns(ns / per), fmt_pct(ns / total),
                     "–" if top is None else str(top.name),
                     "–" if top is None else fmt_ns(top.ns / per),
                     "–" if rng is None else str(rng.range)])
    parts = {p.part: p.ns for p in w.startup.parts.itertuples(index=False)}
    caption = "; ".join(f"{k.replace('_', ' ')} {fmt_ns(v)}" for k, v in parts.items())
    page.add_fitted("host wait", fitted_table(
        f"Host wait by cause ({unit}: the device idle with nothing launched pending, by "
        "what the launching thread did)",
        (Col("cause", "left", wrap=True), Col("time"), Col("share"),
         Col("took it most", "left", name=True, drop=3), Col("its time", drop=2),
         Col("inside range", "left", name=True, drop=1)), rows, page.width,
        caption=f"start-up: {caption}" if caption else None))
