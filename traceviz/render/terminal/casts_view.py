"""The casts line and table of ``analyze`` (the ``casts`` section: AMP's conversions)."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from traceviz.analyses.summary import casts as section
from traceviz.analyses.summary.figures import Summary
from traceviz.render.terminal.fit import Col, fitted_table
from traceviz.render.terminal.page import Page, section_render
from traceviz.units import fmt_ns, fmt_pct


@section_render(section.SECTION)
def cast_section(s: Summary, page: Page) -> None:
    """Cast work and cast ops; an FP32 run (no cast at all) gets no empty section."""
    if s.casts.count or s.casts.cast_ops:
        page.add_fitted("casts", _casts(s, page.wide, page.width))


def _casts(s: Summary, wide: bool, width: int) -> tuple[Group, list[str]]:
    c = s.casts
    what = "CPU ops" if s.cpu_trace else "kernels"
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


