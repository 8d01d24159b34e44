"""The parts of ``analyze``'s terminal output the summary's totals make: the header, the
top kernels and categories, the run's benchmark line, the left-out columns and the
notes (renders of the sections in ``analyses/summary/totals.py``)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from traceviz.analyses.summary import windows
from traceviz.analyses.summary.figures import Summary
from traceviz.analyses.summary.totals import KERNEL_TABLES, NOTES, TIMINGS, TOTALS
from traceviz.analyses.timings import Timings
from traceviz.render.terminal.fit import Col, fitted_table, left_note
from traceviz.render.terminal.host_view import host_rows, step_line, wait_line
from traceviz.render.terminal.page import Page, section_render
from traceviz.units import fmt_ns, fmt_pct, plural


@section_render(TOTALS)
def header(s: Summary, page: Page) -> None:
    """Source, devices, scope, span, step, busy and idle split, kernels, host, launches
    (a trace of user ranges alone: its source and what it holds)."""
    page.add(_ranges_header(s) if s.ranges_only else _header(s))


GAPS_WORTH_A_LINE = 0.01  # of the span: time between step marks worth a word


@section_render(windows.SECTION)
def step_windows(s: Summary, page: Page) -> None:
    """One line where step windows end after their step marks: the last step's work that
    ran past its mark, the steps that run to the next one's start."""
    from traceviz.analyses.summary.windows import DEVICE_WORK

    stretched = s.step_windows
    last = [x for x in stretched if x.why == DEVICE_WORK]
    if last:
        x = max(last, key=lambda x: x.end_ns)
        page.add(Text(f"step {x.step}'s window runs {fmt_ns(x.end_ns - x.mark_start_ns)}, "
                      f"past {x.mark}'s end at {fmt_ns(x.mark_end_ns - x.mark_start_ns)}: "
                      "the kernels launched in the step ran until then", style="yellow"))
    gaps = [x for x in stretched if x.why != DEVICE_WORK]
    extra = sum(x.end_ns - x.mark_end_ns for x in gaps)
    if gaps and extra >= GAPS_WORTH_A_LINE * s.span_ns:  # --json lists every one
        page.add(Text(f"{plural(len(gaps), 'step window')} "
                      f"{'runs' if len(gaps) == 1 else 'run'} past "
                      f"{'its' if len(gaps) == 1 else 'their'} mark's end to the next step's "
                      f"start ({fmt_ns(extra)} in all): the time between marks counts to the "
                      "step before", style="yellow"))


@section_render(KERNEL_TABLES)
def kernel_tables(s: Summary, page: Page) -> None:
    """The top kernels (leaf ops on a CPU) by total time, then the categories (none where
    the kernels were not recorded: the header says so; none in a trace of user ranges
    alone)."""
    if s.kernel_activity_missing or s.ranges_only:
        return
    page.add_fitted("top kernels", _top_kernels(s, page.top, page.wide, page.width))
    page.add_fitted("categories", _categories(s, page.width))


@section_render(TIMINGS)
def timings(s: Summary, page: Page) -> None:
    if s.timings:
        page.add(Text.assemble(("bench", "bold"), " (no profiler): ",
                               timings_line(s.timings)))


@section_render(NOTES)
def notes(s: Summary, page: Page) -> None:
    """What a narrow terminal left out of the tables above, then the summary's notes."""
    if note := left_note(page.width, page.left):
        page.add(note)
    for note_text in s.notes:
        page.add(Text(f"note: {note_text}", style="yellow"))


def _source_grid(s: Summary) -> Table:
    """The header's grid with its first row, the trace's source."""
    meta = s.meta
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("source", f"{meta.get('source_format', '?')} · {meta.get('source_file', '?')}")
    return grid


def _ranges_header(s: Summary) -> Table:
    grid = _source_grid(s)
    rows = s.ranges.rows
    span = int(rows["end_ns"].max() - rows["start_ns"].min()) if len(rows) else 0
    threads = len(rows[["pid", "tid"]].drop_duplicates())
    grid.add_row("trace", f"user ranges only: {len(rows):,} ranges ({len(s.ranges):,} names) "
                          f"on {plural(threads, 'thread')}, no kernels, no framework ops")
    grid.add_row("span", fmt_ns(span))
    return grid


def _header(s: Summary) -> Table:
    meta = s.meta
    grid = _source_grid(s)
    devices = meta.get("devices") or {}
    used = sorted({d.device for d in s.devices if d.device >= 0})
    if s.cpu_trace:
        grid.add_row("trace", "CPU trace (no device rows): the host threads' CPU ops (leaf "
                     "framework ops) play the kernels")
    else:
        # "GPU 3: NVIDIA ..." (an id, not a count of 3)
        names = ", ".join(f"GPU {d}: {devices.get(str(d), '?')}" for d in used)
        if not names and isinstance(devices, dict) and devices:
            # no device row recorded (no kernel activity): the trace still names its GPUs
            names = ", ".join(f"GPU {d}: {n}" for d, n in devices.items()) + \
                " (named by the trace; no device rows recorded)"
        grid.add_row("devices", names or "–")
    if s.kernel_activity_missing:  # no device time: span, busy and idle would be zeros
        grid.add_row("kernel activity", str(s.kernel_activity.line))
    else:
        _busy_rows(grid, s)
    for label, text in host_rows(s):
        grid.add_row(label, text)
    if not s.cpu_trace:
        lo = s.launches
        # one count: every kernel launch call in the trace, all threads; the launching
        # thread's own share is what the "top API calls" row shows (its calls alone)
        main = s.host.main if s.host is not None else None
        threads = ""
        if len(lo.kernel.threads) > 1:
            threads = f" on {len(lo.kernel.threads)} host threads"
            if main is not None:
                threads += (f" ({lo.kernel.calls_of(int(main['pid']), int(main['tid'])):,} "
                            f"on thread {int(main['tid'])}, whose API calls are above)")
        grid.add_row("launches", f"{lo.kernel.count:,} kernel launch calls "
                                 f"({lo.kernel.matched:,} reached a kernel){threads}, "
                                 f"{lo.copies.count:,} copy/set calls"
                     + (f", {lo.graphs.count:,} graph launches ({lo.graphs.kernels:,} kernels)"
                        if lo.graphs.count else ""))
    return grid


def _busy_rows(grid: Table, s: Summary) -> None:
    """Scope, span, step, busy and idle split, kernels."""
    scope = plural(s.steps, "step window") if s.scope == "steps" else \
        "whole trace (no steps)"
    grid.add_row("scope", f"busy and span over {scope}")
    n_dev = len(s.devices)
    # several devices: span and busy add up per device, they are not wall time
    summed = f" (summed over {n_dev} {'GPUs' if not s.cpu_trace else 'devices'})" \
        if n_dev > 1 else ""
    grid.add_row("span" + summed, fmt_ns(s.span_ns))
    grid.add_row("step", step_line(s))
    if s.inputs is not None:  # the verdict reads the trace (a summary made without it)
        b = s.bound
        grid.add_row("bound by", f"{b.title}: {b.why}")
    if s.cpu_trace:
        grid.add_row("busy (CPU ops)", f"{fmt_ns(s.busy_ns)}   framework overhead "
                                        f"{fmt_pct(s.framework_overhead_fraction)}")
    else:
        split = f"   copies (memcpy/memset) {fmt_pct(s.copy_fraction)} of device " \
            "time" if s.copy_fraction else ""
        grid.add_row("GPU busy" + summed, f"{fmt_ns(s.busy_ns)}   idle "
                                          f"{fmt_pct(s.idle_fraction)}{split}")
        grid.add_row("idle, waiting for host", wait_line(s))
        grid.add_row("idle, work queued", fmt_ns(s.queued_idle_ns))
    what = "CPU ops" if s.cpu_trace else "kernels"
    grid.add_row(what, f"{s.kernel_count:,} ({len(s.kernels):,} distinct), "
                       f"{fmt_ns(s.kernel_total_ns)} total")


_STATS = ("mean", "median", "max", "min", "std")  # they leave a narrow table std first


def _top_kernels(s: Summary, top: int, wide: bool, width: int) -> tuple[Table, list[str]]:
    what = "CPU ops" if s.cpu_trace else "kernels"
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


def timings_line(t: Timings) -> str:
    """Median, spread and the noise verdict of a benchmark; the profiler's overhead only
    where it exceeds the spread; the warm-up it took."""
    line = (f"{t.median_s * 1e3:,.3f} ms/batch median of {t.batches} (min "
            f"{t.min_s * 1e3:,.3f} ms, max {t.max_s * 1e3:,.3f} ms, CV {100 * t.cv:.1f}%)")
    if t.noisy:
        line += " · NOISY (CV > 10% or max/min > 1.5: compare medians with care)"
    if t.profiler_overhead is not None:
        line += f" · profiler overhead {t.overhead_text}"
    if t.warmup_batches is not None:
        settled = {True: "settled", False: "NOT settled", None: "fixed"}[t.warmup_settled]
        line += f" · warm-up {t.warmup_batches} batches ({settled})"
    if t.first_call_s is not None and t.warmup_batches:
        line += f" · first call +{t.first_call_s:.3f} s"
        if t.compile_s is not None:
            line += f" (compile {t.compile_s:.3f} s)"
    return line


