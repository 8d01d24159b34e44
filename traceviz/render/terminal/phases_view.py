"""The per-range tables of ``analyze``: the training phases and the nn.Modules (the
``phases`` and ``modules`` sections), times per step where the trace has steps."""

from __future__ import annotations

import pandas as pd
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceviz.analyses.summary import modules, phases, pipeline
from traceviz.analyses.summary.figures import Summary
from traceviz.render.terminal.fit import Col, fitted_table
from traceviz.render.terminal.page import Page, section_render
from traceviz.units import fmt_ns, fmt_pct


@section_render(phases.SECTION)
def phases_table(s: Summary, page: Page) -> None:
    """Per marked phase (none marked: nothing)."""
    if len(s.phases):
        page.add_fitted("phases", _phases(s.phases, s.steps, s.cpu_trace, page.width))


@section_render(modules.SECTION)
def modules_table(s: Summary, page: Page) -> None:
    """Per nn.Module (no ``--modules`` ranges: nothing)."""
    if len(s.modules):
        page.add_fitted("modules", _modules(s, page.top, page.width))


def _phases(phases: pd.DataFrame, steps: int, cpu_trace: bool,
            width: int) -> tuple[Table, list[str]]:
    """The per-phase table; times per step where the trace has steps."""
    per = max(steps, 1)
    unit = " per step" if steps else ""
    what = "CPU ops" if cpu_trace else "kernels"
    cols = [Col("phase", "left"), Col("wall"), Col("busy"), Col("busy/\nwall", drop=3),
            Col(what, drop=4), Col(f"{what}\ntime", drop=5), Col("casts", drop=1),
            Col("cast\ntime", drop=2)]
    rows = [[str(r.phase), fmt_ns(r.wall_ns / per) if r.wall_ns else "–",
             fmt_ns(r.busy_ns / per), fmt_pct(_share(r.busy_ns, r.wall_ns)),
             f"{r.kernels / per:,.0f}", fmt_ns(r.kernel_ns / per), f"{r.casts / per:,.0f}",
             fmt_ns(r.cast_ns / per)] for r in phases.itertuples(index=False)]
    return fitted_table(
        f"Phases{unit} (" + ("a CPU op belongs to the phase it starts in)" if cpu_trace else
                             "work belongs to the phase its launch was made in)"),
        cols, rows, width)


def _modules(summary: Summary, top: int, width: int) -> tuple[Group, list[str]]:
    """Time per nn.Module, in call order (a parent above its children, indented); the
    ``top`` modules by time are shown, the others counted."""
    m = summary.modules
    per = max(summary.steps, 1)
    unit = " per step" if summary.steps else ""
    what = "CPU ops" if summary.cpu_trace else "kernels"
    shown = m[m["kernel_ns"].rank(method="first", ascending=False) <= top]
    cols = [Col("module", "left", label=True), Col("calls", drop=3), Col("wall", drop=2),
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


def _share(part: int | None, whole: int) -> float | None:
    return None if part is None or not whole else part / whole




@section_render(pipeline.SECTION)
def input_pipeline(s: Summary, page: Page) -> None:
    """The input calls' time and the device idle in them (no input call: nothing)."""
    p = s.input_pipeline
    if p is None:
        return
    idle = "no work op ran for" if s.cpu_trace else "the device was idle for"
    per = f" ({fmt_ns(p.input_ns / s.steps)} per step)" if s.steps else ""
    page.add(Text.assemble(
        ("input pipeline: ", "bold"),
        f"{p.calls:,} calls for the next batch ({', '.join(p.frameworks)}) hold "
        f"{fmt_ns(p.input_ns)}{per}, {fmt_pct(p.share)} of the span; {idle} "
        f"{fmt_ns(p.idle_ns)} of it ({fmt_pct(p.idle_share)} of the span)"))
