"""Rich terminal rendering of an analysis ``Summary``."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from traceviz.analyses.summary import Summary
from traceviz.units import fmt_ns, fmt_pct, short_name


def render_summary(summary: Summary, top: int = 15, wide: bool = False,
                   width: int = 120) -> Group:
    """Everything ``traceviz analyze`` prints, as one rich renderable, for ``width`` columns."""
    name_width = max(20, min(60, width - 70))
    parts = [_header(summary), _top_kernels(summary, top, wide, name_width),
             _categories(summary)]
    if not summary.cpu_trace:
        parts.append(_launches(summary))
    parts.append(_casts(summary, wide))
    for note in summary.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts)


def print_summary(console: Console, summary: Summary, top: int = 15, wide: bool = False) -> None:
    console.print(render_summary(summary, top=top, wide=wide, width=console.width))


def _header(s: Summary) -> Table:
    meta = s.meta
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("source", f"{meta.get('source_format', '?')} · {meta.get('source_file', '?')}")
    devices = meta.get("devices") or {}
    used = sorted({d.device for d in s.devices if d.device >= 0})
    if s.cpu_trace:
        grid.add_row("trace", "CPU trace (no device rows): leaf framework ops play the kernels")
    else:
        names = ", ".join(f"{d}: {devices.get(str(d), 'GPU')}" for d in used) or "–"
        grid.add_row("devices", names)
    scope = f"{s.steps} step(s)" if s.scope == "steps" else "whole trace (no steps)"
    grid.add_row("scope", f"busy and span over {scope}")
    busy_label = "CPU busy (leaf ops)" if s.cpu_trace else "GPU busy"
    idle_label = "framework overhead" if s.cpu_trace else "launch-bound"
    grid.add_row("span", fmt_ns(s.span_ns))
    grid.add_row(busy_label, f"{fmt_ns(s.busy_ns)}   {idle_label} {fmt_pct(s.idle_fraction)}")
    what = "leaf ops" if s.cpu_trace else "kernels"
    grid.add_row(what, f"{s.kernel_count:,} ({len(s.kernels):,} distinct), "
                       f"{fmt_ns(s.kernel_total_ns)} total")
    if not s.cpu_trace:
        grid.add_row("launches", f"{s.launches.count:,} calls, {s.launches.matched:,} matched "
                                 "to device work")
    return grid


def _top_kernels(s: Summary, top: int, wide: bool, name_width: int) -> Table:
    what = "leaf ops" if s.cpu_trace else "kernels"
    t = Table(title=f"Top {what} by total time", box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("name", overflow="fold" if wide else "ellipsis", no_wrap=not wide,
                 max_width=None if wide else name_width)
    for col in ("category", "count", "total", "mean", "share"):
        t.add_column(col, justify="left" if col == "category" else "right", no_wrap=True)
    for i, r in enumerate(s.kernels.head(top).itertuples(index=False), 1):
        name = r.name if wide else short_name(r.name, name_width)
        t.add_row(str(i), name, r.category, f"{r.count:,}", fmt_ns(r.total_ns),
                  fmt_ns(r.mean_ns), fmt_pct(r.share))
    rest = s.kernels.iloc[top:]
    if len(rest):
        t.add_row("", f"({len(rest):,} others)", "", f"{int(rest['count'].sum()):,}",
                  fmt_ns(rest["total_ns"].sum()), "", fmt_pct(rest["share"].sum()))
    return t


def _categories(s: Summary) -> Table:
    t = Table(title="Categories", box=box.SIMPLE_HEAD, title_justify="left")
    for col, just in (("category", "left"), ("count", "right"), ("total", "right"),
                      ("share", "right")):
        t.add_column(col, justify=just, no_wrap=True)
    cats = s.categories.sort_values("total_ns", ascending=False, kind="stable")
    for r in cats.itertuples(index=False):
        if r.count:
            t.add_row(r.category, f"{r.count:,}", fmt_ns(r.total_ns), fmt_pct(r.share))
    return t


def _launches(s: Summary) -> Table:
    lo = s.launches
    t = Table(title="Launch overhead", box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("metric", no_wrap=True)
    for col in ("median", "p90", "max"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("", justify="left", style="dim")
    t.add_row("launch-bound fraction", fmt_pct(s.idle_fraction), "", "",
              "1 - GPU busy / span")
    t.add_row("launch-API share of host time", fmt_pct(lo.api_share), "", "",
              f"{lo.count:,} calls, {fmt_ns(lo.host_ns)}")
    t.add_row("launch call duration", fmt_ns(lo.call.median_ns), fmt_ns(lo.call.p90_ns),
              fmt_ns(lo.call.max_ns), "")
    t.add_row("launch delay", fmt_ns(lo.delay.median_ns), fmt_ns(lo.delay.p90_ns),
              fmt_ns(lo.delay.max_ns), "kernel start - launch end")
    t.add_row("short kernels", f"{lo.short_kernels:,}", "", "",
              "device time < launch time")
    if lo.unlaunched_kernels:
        t.add_row("kernels without launch row", f"{lo.unlaunched_kernels:,}", "", "",
                  "launch outside window")
    return t


def _casts(s: Summary, wide: bool) -> Group:
    c = s.casts
    what = "leaf ops" if s.cpu_trace else "kernels"
    line = Text.assemble(
        ("Cast ops (AMP)", "italic"),
        f": {c.count:,} cast {what}, {fmt_ns(c.total_ns)} = {fmt_pct(c.share_of_busy)} of busy "
        f"time; {c.cast_ops:,} aten::_to_copy/Cast ops (dtype or device copies)",
    )
    if c.top.empty:
        return Group(line)
    t = Table(box=box.SIMPLE_HEAD)
    t.add_column("name", overflow="fold" if wide else "ellipsis", no_wrap=not wide,
                 max_width=None if wide else 50)
    t.add_column("op", no_wrap=True)
    t.add_column("count", justify="right", no_wrap=True)
    t.add_column("total", justify="right", no_wrap=True)
    for r in c.top.head(5).itertuples(index=False):
        name = str(r.name) if wide else short_name(str(r.name), 50)
        op = "" if r.op is None or r.op != r.op else str(r.op)
        t.add_row(name, op, f"{r.count:,}", fmt_ns(r.total_ns))
    return Group(line, t)
