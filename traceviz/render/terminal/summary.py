"""Rich terminal renderings of ``analyze``: the ``Summary`` of one trace and the figures of
many ranks (``compare`` and ``amp``: ``render/runs.py``)."""

from __future__ import annotations

import statistics

import pandas as pd
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceviz.analyses.compare.ranks import (
    RankFigures,
    RanksSummary,
    rank_time,
    slowest_ranks,
    widest_steps,
)
from traceviz.analyses.summary.figures import Summary
from traceviz.analyses.timings import Timings
from traceviz.render.terminal.fit import NAME_MIN, Col, fitted_table, left_note
from traceviz.render.terminal.host import host_rows, step_line, streams_table
from traceviz.units import fmt_ns, fmt_pct, plural


def render_summary(summary: Summary, top: int = 15, wide: bool = False,
                   width: int = 120) -> Group:
    """Everything ``traceviz analyze`` prints, as one rich renderable, for ``width`` columns:
    each table fitted (``render/fit.py``), what a narrow terminal leaves out named last."""
    left: dict[str, list[str]] = {}
    kernels, left["top kernels"] = _top_kernels(summary, top, wide, width)
    cats, left["categories"] = _categories(summary, width)
    parts: list[RenderableType] = [_header(summary), kernels, cats]
    if len(summary.phases):
        phases, left["phases"] = _phases(summary.phases, summary.steps, summary.cpu_trace,
                                         width)
        parts.append(phases)
    if len(summary.modules):
        mods, left["modules"] = _modules(summary, top, width)
        parts.append(mods)
    if not summary.cpu_trace:
        if any(o.streams >= 2 for o in summary.stream_overlap):
            streams, left["streams"] = streams_table(summary, width)
            parts.append(streams)
        launches, left["launch overhead"] = _launches(summary, width)
        parts.append(launches)
    if summary.casts.count or summary.casts.cast_ops:  # an FP32 run: no empty section
        casts, left["casts"] = _casts(summary, wide, width)
        parts.append(casts)
    if summary.efficiency is not None:
        from traceviz.render.terminal.efficiency import efficiency_render, memory_render

        parts.append(efficiency_render(summary.efficiency, top=top, width=width))
        if summary.memory is not None and (mem := memory_render(summary.memory)):
            parts.append(mem)
    if summary.timings:
        parts.append(Text.assemble(("bench", "bold"), " (no profiler): ",
                                   timings_line(summary.timings)))
    if note := left_note(width, left):
        parts.append(note)
    for note_text in summary.notes:
        parts.append(Text(f"note: {note_text}", style="yellow"))
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
        # "GPU 3: NVIDIA ..." (an id, not a count of 3)
        names = ", ".join(f"GPU {d}: {devices.get(str(d), '?')}" for d in used) or "–"
        grid.add_row("devices", names)
    scope = plural(s.steps, "step window") if s.scope == "steps" else \
        "whole trace (no steps)"
    grid.add_row("scope", f"busy and span over {scope}")
    n_dev = len(s.devices)
    # several devices: span and busy add up per device, they are not wall time
    summed = f" (summed over {n_dev} {'GPUs' if not s.cpu_trace else 'devices'})" \
        if n_dev > 1 else ""
    grid.add_row("span" + summed, fmt_ns(s.span_ns))
    grid.add_row("step", step_line(s))
    if s.cpu_trace:
        grid.add_row("CPU busy (leaf ops)", f"{fmt_ns(s.busy_ns)}   framework overhead "
                                            f"{fmt_pct(s.framework_overhead_fraction)}")
    else:
        split = f"   copies (memcpy/memset) {fmt_pct(s.copy_fraction)} of device " \
            "time" if s.copy_fraction else ""
        grid.add_row("GPU busy" + summed, f"{fmt_ns(s.busy_ns)}   idle "
                                          f"{fmt_pct(s.idle_fraction)}{split}")
        grid.add_row("idle, waiting for host", f"{fmt_ns(s.host_wait_ns)}   launch-bound "
                                               f"{fmt_pct(s.launch_bound_fraction)}")
        grid.add_row("idle, work queued", fmt_ns(s.queued_idle_ns))
    what = "leaf ops" if s.cpu_trace else "kernels"
    grid.add_row(what, f"{s.kernel_count:,} ({len(s.kernels):,} distinct), "
                       f"{fmt_ns(s.kernel_total_ns)} total")
    for label, text in host_rows(s):
        grid.add_row(label, text)
    if not s.cpu_trace:
        lo = s.launches
        grid.add_row("launches", f"{lo.kernel.count:,} kernel launch calls "
                                 f"({lo.kernel.matched:,} reached a kernel), "
                                 f"{lo.copies.count:,} copy/set calls"
                     + (f", {lo.graphs.count:,} graph launches ({lo.graphs.kernels:,} kernels)"
                        if lo.graphs.count else ""))
    return grid


_STATS = ("mean", "median", "max", "min", "std")  # they leave a narrow table std first


def _top_kernels(s: Summary, top: int, wide: bool, width: int) -> tuple[Table, list[str]]:
    what = "leaf ops" if s.cpu_trace else "kernels"
    by = " and launch configuration" if s.by_config else ""
    cols = [Col("#"), Col("name", "left", name=True),
            *([Col("config", "left", wrap=True)] if s.by_config else []),
            Col("category", "left", drop=6), Col("count"), Col("total"),
            *(Col(c, drop=5 - i) for i, c in enumerate(_STATS)), Col("share")]
    rows = []
    for i, r in enumerate(s.kernels.head(top).itertuples(index=False), 1):
        values = (r.mean_ns, r.median_ns, r.max_ns, r.min_ns, r.std_ns)
        rows.append([str(i), str(r.name), *([r.details or "–"] if s.by_config else []),
                     str(r.category), f"{r.count:,}", fmt_ns(r.total_ns),
                     *(fmt_ns(v) for v in values), fmt_pct(r.share)])
    rest = s.kernels.iloc[top:]
    if len(rest):
        rows.append(["", f"({plural(len(rest), 'other')})", *([""] if s.by_config else []), "",
                     f"{int(rest['count'].sum()):,}", fmt_ns(rest["total_ns"].sum()),
                     *([""] * len(_STATS)), fmt_pct(rest["share"].sum())])
    # a name keeps 40 columns before the statistics and the category leave
    return fitted_table(f"Top {what}{by} by total time", cols, rows, width, wide=wide,
                        name_least=40)


def _categories(s: Summary, width: int) -> tuple[Table, list[str]]:
    cats = s.categories.sort_values("total_ns", ascending=False, kind="stable")
    rows = [[str(r.category), f"{r.count:,}", fmt_ns(r.total_ns), fmt_pct(r.share)]
            for r in cats.itertuples(index=False) if r.count]
    return fitted_table("Categories", (Col("category", "left"), Col("count"), Col("total"),
                                       Col("share")), rows, width)


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


def _phases(phases: pd.DataFrame, steps: int, cpu_trace: bool,
            width: int) -> tuple[Table, list[str]]:
    """The per-phase table; times per step where the trace has steps."""
    per = max(steps, 1)
    unit = " per step" if steps else ""
    what = "leaf ops" if cpu_trace else "kernels"
    cols = [Col("phase", "left"), Col("wall"), Col("busy"), Col("busy/\nwall", drop=3),
            Col(what, drop=4), Col(f"{what}\ntime", drop=5), Col("casts", drop=1),
            Col("cast\ntime", drop=2)]
    rows = [[str(r.phase), fmt_ns(r.wall_ns / per) if r.wall_ns else "–",
             fmt_ns(r.busy_ns / per), fmt_pct(_share(r.busy_ns, r.wall_ns)),
             f"{r.kernels / per:,.0f}", fmt_ns(r.kernel_ns / per), f"{r.casts / per:,.0f}",
             fmt_ns(r.cast_ns / per)] for r in phases.itertuples(index=False)]
    return fitted_table(
        f"Phases{unit} (work belongs to the phase its launch was made in)", cols, rows, width)


def _modules(summary: Summary, top: int, width: int) -> tuple[Group, list[str]]:
    """Time per nn.Module, in call order (a parent above its children, indented); the
    ``top`` modules by time are shown, the others counted."""
    m = summary.modules
    per = max(summary.steps, 1)
    unit = " per step" if summary.steps else ""
    what = "leaf ops" if summary.cpu_trace else "kernels"
    shown = m[m["kernel_ns"].rank(method="first", ascending=False) <= top]
    cols = [Col("module", "left", wrap=True), Col("calls", drop=3), Col("wall", drop=2),
            Col(what, drop=1), Col(f"{what}\ntime"), Col("share")]
    rows = [["  " * int(r.depth) + str(r.module), f"{r.calls / per:,.0f}",
             fmt_ns(r.wall_ns / per), f"{r.kernels / per:,.0f}", fmt_ns(r.kernel_ns / per),
             fmt_pct(r.share)] for r in shown.itertuples(index=False)]
    table, left = fitted_table(f"Modules{unit} (forward calls; a module includes its "
                               "children)", cols, rows, width)
    parts: list[RenderableType] = [table]
    if len(shown) < len(m):
        parts.append(Text(f"{len(m) - len(shown)} more modules (--top, or --json for all)"))
    return Group(*parts), left


def timings_line(t: Timings) -> str:
    """Median, spread and the noise verdict of a benchmark; the profiler's overhead only
    where it exceeds the spread; the warm-up it took."""
    line = (f"{t.median_s * 1e3:,.3f} ms/batch median of {t.batches} (min "
            f"{t.min_s * 1e3:,.3f} ms, max {t.max_s * 1e3:,.3f} ms, CV {100 * t.cv:.1f}%)")
    if t.noisy:
        line += " · NOISY (CV > 10% or max/min > 1.5: compare medians with care)"
    if t.profiler_overhead is not None:
        line += (f" · profiler overhead {t.profiler_overhead:.2f}x" if t.overhead_significant
                 else " · profiler overhead within noise")
    if t.warmup_batches is not None:
        settled = {True: "settled", False: "NOT settled", None: "fixed"}[t.warmup_settled]
        line += f" · warm-up {t.warmup_batches} batches ({settled})"
    if t.first_call_s is not None and t.warmup_batches:
        line += f" · first call +{t.first_call_s:.3f} s"
        if t.compile_s is not None:
            line += f" (compile {t.compile_s:.3f} s)"
    return line


def _share(part: int | None, whole: int) -> float | None:
    return None if part is None or not whole else part / whole


def _casts(s: Summary, wide: bool, width: int) -> tuple[Group, list[str]]:
    c = s.casts
    what = "leaf ops" if s.cpu_trace else "kernels"
    line = Text.assemble(
        ("Cast ops (AMP)", "italic"),
        f": {c.count:,} cast {what}, {fmt_ns(c.total_ns)} = {fmt_pct(c.share_of_busy)} of busy "
        f"time; {c.cast_ops:,} cast ops (aten::_to_copy, Cast, convert; nested ones once)"
        + ("" if s.meta.get("dtypes_recorded") or not c.cast_ops else
           " — dtypes not recorded, so device and layout copies may count as casts"),
    )
    if c.top.empty:
        return Group(line), []
    rows = [[str(r.name), "" if r.op is None or r.op != r.op else str(r.op), f"{r.count:,}",
             fmt_ns(r.total_ns)] for r in c.top.head(5).itertuples(index=False)]
    t, left = fitted_table("", (Col("name", "left", name=True), Col("op", "left", drop=1),
                                Col("count"), Col("total")), rows, width, wide=wide)
    return Group(line, t), left


LIST_ROWS = 32


_RANK_COLS = (Col("rank"), Col("step\n(median)"), Col("busy", drop=4),
              Col("launch-\nbound", drop=5), Col("comm", drop=3), Col("comm\noverlapped"),
              Col("kernels", drop=2), Col("top\nkernel", "left", drop=1, name=True))
_STRAGGLER_COLS = (Col("step"), Col("ranks", drop=1), Col("slowest\nrank"),
                   Col("its step\ntime"), Col("median", drop=2), Col("max/\nmedian"))
_KERNEL_COLS = (Col("name", "left", name=True), Col("category", "left", drop=5),
                Col("ranks", drop=4), Col("count", drop=3), Col("total"),
                Col("min\nrank", drop=1), Col("max\nrank", drop=2), Col("share", drop=6))


def ranks_render(s: RanksSummary, top: int = 10, width: int = 120) -> Group:
    """``analyze`` of a rank folder or dataset: per rank, stragglers, top kernels, for
    ``width`` columns. Over ``LIST_ROWS`` ranks (steps): the ``top`` slowest ranks (the
    ``top`` steps of widest spread); ``--json`` keeps every one."""
    listed = s.ranks if len(s.ranks) <= LIST_ROWS else slowest_ranks(s.ranks, top)
    what = "median step" if any(r.step_ns is not None for r in s.ranks) else "span"
    title = f"Ranks ({len(s.ranks):,})" if listed is s.ranks else (
        f"Ranks ({len(s.ranks):,}): the {len(listed)} slowest by {what}")
    rows = [_rank_row(r) for r in listed]
    left: dict[str, list[str]] = {}  # per table, the columns the width left out
    # a rank's top kernel is a hint: it narrows to NAME_MIN before a figure leaves
    t, left["ranks"] = fitted_table(title, _RANK_COLS, rows, width, name_least=NAME_MIN)
    parts: list[RenderableType] = [t, Text(
        "busy, comm, kernels: per step (whole trace without steps); comm overlapped: the share "
        "of communication-kernel time a computation kernel overlaps (HTA's definition)",
        style="dim")]
    if listed is not s.ranks:
        parts.append(Text(_rank_spread(s, what), style="dim"))
    if len(s.stragglers):
        steps = (s.stragglers if len(s.stragglers) <= LIST_ROWS
                 else widest_steps(s.stragglers, top))
        rows = [[str(r.step), str(r.ranks), str(r.slowest_rank), fmt_ns(r.max_ns),
                 fmt_ns(r.median_ns), "–" if pd.isna(r.spread) else f"{r.spread:.3f}"]
                for r in steps.itertuples(index=False)]
        st, left["stragglers"] = fitted_table(
            "Stragglers: per step, the slowest rank" if steps is s.stragglers
            else f"Stragglers: the {len(steps)} of {len(s.stragglers):,} steps with the "
                 "widest max/median", _STRAGGLER_COLS, rows, width)
        parts.append(st)
    rows = [[r.name, r.category, str(r.ranks), f"{r.count:,}", fmt_ns(r.total_ns),
             fmt_ns(r.min_rank_ns), fmt_ns(r.max_rank_ns), fmt_pct(r.share)]
            for r in s.top_kernels.head(top).itertuples(index=False)]
    k, left["top kernels"] = fitted_table("Top kernels across ranks", _KERNEL_COLS, rows, width,
                                          name_least=NAME_MIN)
    parts.append(k)
    if note := left_note(width, left):
        parts.append(note)
    parts += [Text(f"note: {n}", style="yellow") for n in s.notes]
    return Group(*parts)


def _rank_row(r: RankFigures) -> list[str]:
    """A rank's cells in ``_RANK_COLS`` order: busy, comm and kernels per step."""
    per = max(r.steps, 1)
    return [str(r.rank), fmt_ns(r.step_ns), fmt_ns(r.busy_ns / per),
            fmt_pct(r.launch_bound_fraction), fmt_ns(r.comm_ns / per),
            fmt_pct(r.comm_overlap_fraction), f"{r.kernel_count / per:,.0f}",
            r.top_kernel or ""]


def _rank_spread(s: RanksSummary, what: str) -> str:
    """One line for the ranks a long table leaves out: fastest, median and slowest."""
    slow = slowest_ranks(s.ranks, 1)[0]
    fast = min(s.ranks, key=lambda r: (rank_time(r), r.rank))
    median = statistics.median(rank_time(r) for r in s.ranks)
    return (f"{what} over all {len(s.ranks):,} ranks: fastest {fmt_ns(rank_time(fast))} "
            f"(rank {fast.rank}), median {fmt_ns(median)}, slowest {fmt_ns(rank_time(slow))} "
            f"(rank {slow.rank}); --json lists every rank")

