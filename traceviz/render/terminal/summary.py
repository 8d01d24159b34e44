"""Rich terminal renderings of ``analyze``: the ``Summary`` of one trace and the figures of
many ranks (``compare`` and ``amp``: ``render/runs.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pandas as pd
from rich.console import Console, Group, RenderableType
from rich.text import Text

from traceviz.analyses.summary.figures import Summary
from traceviz.render.terminal.fit import NAME_MIN, Col, fitted_table, left_note
from traceviz.render.terminal.page import Page
from traceviz.render.terminal.sections import renders
from traceviz.units import fmt_ns, fmt_pct

if TYPE_CHECKING:
    # the ranks' analyses are imported by the rank renders only: an analyze of one trace
    # does not pay for them
    from traceviz.analyses.compare.ranks import RankFigures, RanksSummary


def render_summary(summary: Summary, top: int = 15, wide: bool = False,
                   width: int = 120) -> Group:
    """Everything ``traceviz analyze`` prints, as one rich renderable, for ``width`` columns:
    each registered section's render in order (``sections.py``), each table fitted
    (``render/fit.py``), what a narrow terminal leaves out named last."""
    return Group(*_page_parts(summary, Page(top=top, wide=wide, width=width)))


def print_summary(console: Console, summary: Summary, top: int = 15, wide: bool = False) -> None:
    """``render_summary``'s page, each section printed once rendered: the sections read
    later are computed while the first ones print (or in another process, ``apart``)."""
    for part in _page_parts(summary, Page(top=top, wide=wide, width=console.width)):
        console.print(part)


def _page_parts(summary: Summary, page: Page) -> Iterator[RenderableType]:
    """The page's parts, each section's as soon as its render has added them."""
    for _, render in renders():
        start = len(page.parts)
        render(summary, page)
        yield from page.parts[start:]


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
    listed = s.ranks if len(s.ranks) <= LIST_ROWS else s.slowest(top)
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
                 else s.widest_steps(top))
        rows = [[str(r.step), str(r.ranks), str(r.slowest_rank), fmt_ns(r.max_ns),
                 fmt_ns(r.median_ns), "–" if pd.isna(r.spread) else f"{r.spread:.3f}"]
                for r in steps.itertuples(index=False)]
        st, left["stragglers"] = fitted_table(
            "Slowest rank per step (slow, not late: see the arrivals)" if steps is s.stragglers
            else f"Slowest rank per step: the {len(steps)} of {len(s.stragglers):,} steps with the "
                 "widest max/median", _STRAGGLER_COLS, rows, width)
        parts.append(st)
    if s.arrivals is not None:
        parts += _arrivals(s, width, left)
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


_ARRIVAL_COLS = (Col("rank"), Col("arrived\nlast"), Col("others' wait\nit caused"),
                 Col("its own\nwait"), Col("clock\noffset", drop=1))


def _arrivals(s: RanksSummary, width: int, left: dict[str, list[str]]
              ) -> list[RenderableType]:
    """Ranks by arrival at the collectives: the straggler, apart from the ranks that wait."""
    a = s.arrivals
    assert a is not None
    n = len(a.collectives)
    rows = [[str(r.rank), f"{r.last:,} of {n:,}", fmt_ns(r.caused_ns), fmt_ns(r.wait_ns),
             fmt_ns(r.offset_ns)] for r in a.per_rank.itertuples(index=False)]
    t, left["arrivals"] = fitted_table(
        f"Arrivals at the {n:,} collectives every rank ran", _ARRIVAL_COLS, rows, width)
    if a.straggler is None:
        line = "no rank arrives last at any collective"
    else:
        last = a.per_rank.set_index("rank").loc[a.straggler]
        line = (f"straggler: rank {a.straggler}, last to launch into {int(last['last']):,} "
                f"of {n:,} collectives, the others waiting {fmt_ns(int(last['caused_ns']))} "
                f"for it; longest waits (waiting, not late): ranks "
                f"{', '.join(map(str, a.waits_longest))}")
    if a.clock_corrected:
        line += "; clocks differ between ranks: times corrected by each rank's offset"
    return [t, Text(line, style="dim")]


def _rank_row(r: RankFigures) -> list[str]:
    """A rank's cells in ``_RANK_COLS`` order: busy, comm and kernels per step."""
    per = max(r.steps, 1)
    return [str(r.rank), fmt_ns(r.step_ns), fmt_ns(r.busy_ns / per),
            fmt_pct(r.launch_bound_fraction), fmt_ns(r.comm_ns / per),
            fmt_pct(r.comm_overlap_fraction), f"{r.kernel_count / per:,.0f}",
            r.top_kernel or ""]


def _rank_spread(s: RanksSummary, what: str) -> str:
    """One line for the ranks a long table leaves out: fastest, median and slowest."""
    slow, fast = s.slowest(1)[0], s.fastest()
    return (f"{what} over all {len(s.ranks):,} ranks: fastest {fmt_ns(fast.compared_ns)} "
            f"(rank {fast.rank}), median {fmt_ns(s.median_time())}, slowest "
            f"{fmt_ns(slow.compared_ns)} "
            f"(rank {slow.rank}); --json lists every rank")

