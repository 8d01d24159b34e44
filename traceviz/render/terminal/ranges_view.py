"""The Ranges section on the terminal: time per user range name (as ``nsys stats
--report nvtxsum`` gives it), the device work launched inside, the kernels per range and
a strip of the outermost ranges over time."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from traceviz.analyses.summary import ranges as section
from traceviz.analyses.summary.figures import Summary
from traceviz.render.terminal.fit import Col, fitted_table
from traceviz.render.terminal.page import Page, section_render
from traceviz.units import fmt_ns, fmt_pct, plural

MARKS = "ABCDEFGH"  # one letter per drawn name (analyses' TIMELINE_NAMES)
OTHER, EMPTY = "+", "·"


@section_render(section.SECTION)
def ranges_section(s: Summary, page: Page) -> None:
    """The Ranges tables (no ranges in the trace: nothing)."""
    r = s.ranges
    if not len(r):
        return
    page.add_fitted("ranges", _table(r.table, r.has_device_work, page))
    if len(r.kernels):
        page.add_fitted("range kernels", _kernels(r.kernels, page))
    if not s.kernel_count and r.timeline:
        page.add(_timeline(r.timeline, page.width))


def _table(t, device: bool, page: Page):
    shown = t.head(page.top)
    cols = [Col("range", "left", label=True), Col("style", drop=1), Col("count"),
            Col("total"), Col("share"), Col("mean", drop=6), Col("median", drop=5),
            Col("min", drop=3), Col("max", drop=4), Col("std", drop=2)]
    if device:
        cols += [Col("GPU\nops", drop=7), Col("GPU\nprojected", drop=9),
                 Col("kernel\ntime", drop=8)]
    rows = []
    for x in shown.itertuples(index=False):
        name = f"{x.parent} → {x.name}" if x.parent else str(x.name)
        row = [name, str(x.style), f"{x.instances:,}", fmt_ns(x.total_ns), fmt_pct(x.share),
               fmt_ns(x.avg_ns), fmt_ns(x.med_ns), fmt_ns(x.min_ns), fmt_ns(x.max_ns),
               fmt_ns(x.std_ns)]
        if device:
            row += [f"{x.gpu_ops:,}", fmt_ns(x.proj_ns) if x.gpu_ops else "–",
                    fmt_ns(x.kernel_ns) if x.kernels else "–"]
        rows.append(row)
    rest = t.iloc[page.top:]
    if len(rest):
        rows.append([f"({plural(len(rest), 'other name')})", "",
                     f"{int(rest['instances'].sum()):,}", fmt_ns(rest["total_ns"].sum()),
                     fmt_pct(rest["share"].sum()), *[""] * (len(cols) - 5)])
    title = ("Ranges by total time (every range counts, nested or not; "
             "GPU projected: first to last device op launched inside)" if device else
             "Ranges by total time (every range counts, nested or not)")
    return fitted_table(title, cols, rows, page.width)


def _kernels(k, page: Page):
    top = k.sort_values("total_ns", ascending=False, kind="stable").head(page.top)
    cols = [Col("range", "left", label=True), Col("kernel", "left", name=True),
            Col("ranges", drop=2), Col("count"), Col("total"), Col("mean", drop=1)]
    rows = [[str(x.range), str(x.kernel), f"{x.ranges:,}", f"{x.kernels:,}",
             fmt_ns(x.total_ns), fmt_ns(x.avg_ns)] for x in top.itertuples(index=False)]
    return fitted_table("Kernels launched inside each range (a kernel counts in every "
                        "range around its launch)", cols, rows, page.width,
                        wide=page.wide, name_least=30)


def _timeline(threads: list[dict], width: int) -> Group:
    """One strip per thread: a letter per slice of time for the outermost range covering
    most of it, with the legend; a narrow terminal shows every other slice (or fewer)."""
    parts = [Text("Range timeline (outermost ranges; each mark one slice of the span)",
                  style="bold")]
    for th in threads:
        names = th["names"]
        label = f"  thread {th['tid']}  |"
        cells = th["cells"]
        room = max(width - len(label) - 1, 10)
        cells = cells[::-(-len(cells) // room)]  # every k-th slice, so the strip fits
        marks = [MARKS[c] if 0 <= c < len(names) else OTHER if c == len(names) else EMPTY
                 for c in cells]
        span = th["end_ns"] - th["start_ns"]
        parts.append(Text(f"{label}{''.join(marks)}|"))
        parts.append(Text(f"    {fmt_ns(span)}, {th['outermost']:,} outermost ranges, "
                          f"{fmt_pct(th['covered_ns'] / span if span else None)} of the "
                          "span inside one", style="dim"))
        legend = "  ".join(f"{MARKS[i]} {n}" for i, n in enumerate(names))
        parts.append(Text(f"    {legend}", style="dim"))
        if th["repeats"] > 1:
            parts.append(Text(f"    in order: {' → '.join(th['cycle'])}, "
                              f"{th['repeats']:,} times"))
    return Group(*parts)


def range_diff_table(diff, label_a: str, label_b: str, top: int, width: int):
    """``compare``'s table of two runs by range name (``analyses/compare/range_diff.py``)."""
    cols = [Col("range", "left", label=True), Col(f"calls\n{label_a}", drop=3),
            Col(f"calls\n{label_b}", drop=2), Col(f"mean\n{label_a}"), Col(f"mean\n{label_b}"),
            Col("mean\nchange"), Col(f"total\n{label_a}", drop=5),
            Col(f"total\n{label_b}", drop=4), Col(f"share\n{label_a}", drop=7),
            Col(f"share\n{label_b}", drop=6)]
    rows = [[str(r.name), f"{r.a_calls:,}", f"{r.b_calls:,}",
             fmt_ns(r.a_mean_ns) if r.a_calls else "–", fmt_ns(r.b_mean_ns) if r.b_calls else "–",
             f"{100 * r.mean_change:+.1f}%" if r.mean_change == r.mean_change else
             ("new" if not r.a_calls else "gone"),
             fmt_ns(r.a_total_ns), fmt_ns(r.b_total_ns), fmt_pct(r.a_share),
             fmt_pct(r.b_share)] for r in diff.head(top).itertuples(index=False)]
    table, _ = fitted_table(f"Ranges: {label_a} → {label_b} (per call; change of the mean)",
                            cols, rows, width)
    return table
