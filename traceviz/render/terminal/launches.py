"""The Launch overhead table of ``analyze`` (the ``launches`` section; GPU traces)."""

from __future__ import annotations

from rich.table import Table

from traceviz.analyses.summary import launch
from traceviz.analyses.summary.figures import Summary
from traceviz.render.terminal.fit import Col, fitted_table
from traceviz.render.terminal.page import Page, section_render
from traceviz.units import fmt_ns, fmt_pct


@section_render(launch.SECTION)
def launch_overhead(s: Summary, page: Page) -> None:
    """Launch-bound and queued idle, queue depth, launch calls and delays (GPU traces)."""
    if not s.cpu_trace:
        page.add_fitted("launch overhead", _launches(s, page.width))


_LAUNCH_COLS = (Col("metric", "left", wrap=True), Col("value/\nmedian"), Col("p90", drop=1),
                Col("max", drop=2), Col("", "left", wrap=True, drop=3))


def _launches(s: Summary, width: int) -> tuple[Table, list[str]]:
    lo = s.launches
    rows = [["launch-bound fraction", fmt_pct(s.launch_bound_fraction), "", "",
             "idle with nothing launched pending / span"],
            ["queued idle", fmt_pct(s.queued_idle_fraction), "", "",
             "idle while launched work waits (dependencies, syncs, device behind host)"]]
    for d in s.devices:
        if d.queue_mean is not None:
            rows.append([f"queue depth, device {d.device}", f"{d.queue_mean:,.1f}", "",
                         f"{d.queue_max:,}", "launched, not started: time-weighted mean, max"])
    rows += [["kernel-launch API share", fmt_pct(lo.kernel.api_share), "", "",
              f"{lo.kernel.count:,} calls, {fmt_ns(lo.kernel.host_ns)}; share of wall time"],
             ["launch call duration", fmt_ns(lo.kernel.call.median_ns),
              fmt_ns(lo.kernel.call.p90_ns), fmt_ns(lo.kernel.call.max_ns), ""],
             ["launch delay", fmt_ns(lo.delay.median_ns), fmt_ns(lo.delay.p90_ns),
              fmt_ns(lo.delay.max_ns), "kernel start - launch end" + (
                  " (in a graph: - the previous kernel's end)" if lo.graphs.count else "")],
             ["short kernels", f"{lo.short_kernels:,}", "", "",
              "device time < launch call time"]]
    if lo.copies.count:
        rows.append(["copy/set API share", fmt_pct(lo.copies.api_share), "", "",
                     f"{lo.copies.count:,} calls, {fmt_ns(lo.copies.host_ns)}"])
    if lo.graphs.count:
        g = lo.graphs
        rows += [["graph launches", f"{g.count:,}", "", "",
                  f"{g.kernels:,} kernels, {fmt_ns(g.kernel_ns)} (not in short kernels)"],
                 ["graph first-kernel delay", fmt_ns(g.first_delay.median_ns),
                  fmt_ns(g.first_delay.p90_ns), fmt_ns(g.first_delay.max_ns), ""]]
    if lo.unlaunched_kernels:
        rows.append(["kernels without launch row", f"{lo.unlaunched_kernels:,}", "", "",
                     "launched before the trace began, or not recorded"])
    return fitted_table("Launch overhead", _LAUNCH_COLS, rows, width)


