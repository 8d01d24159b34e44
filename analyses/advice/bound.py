"""Advice on what bounds the step (theme ``bound``): the finding for the verdict
``device`` (``summary/verdict.py`` gives the verdict; ``BOUND_RULES`` names the finding
that goes first for each), and exposed communication."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.advice.run_uses import run_uses
from traceviz.analyses.summary.verdict import (  # noqa: F401 (the advice API's names)
    COMM_SHARE,
    HOST_SHARE,
    INPUT_SHARE,
    STEADY_MIN,
    Bound,
    step_bound,
)
from traceviz.units import fmt_ns, fmt_pct

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

BOUND_RULES = {"input": ("input_pipeline",), "host": ("host_bound",),
               "unknown": ("no_kernel_activity",), "communication": ("communication",),
               "device": ("device_bound",), "startup": ("startup",)}


def exposed_communication(ctx: Context) -> tuple[int, int]:
    """(communication time, the part no computation kernel overlaps): the summary's."""
    from traceviz.analyses.summary.verdict import exposed_communication as of

    return of(ctx.summary)


def _top_categories(ctx: Context, n: int = 3) -> str:
    cats = ctx.summary.categories
    if cats is None or not len(cats):
        return ""
    total = float(cats["total_ns"].sum()) or 1.0
    top = cats.sort_values("total_ns", ascending=False).head(n)
    return ", ".join(f"{c} {fmt_pct(t / total)}" for c, t in
                     zip(top["category"].astype(str), top["total_ns"], strict=True))


def device_bound(ctx: Context) -> Finding | None:
    """The verdict ``device``: the device's own work sets the pace; what it spends its
    time on, so that the findings after it (precision, fusion, shapes) read in order."""
    b = ctx.bound
    if b.by != "device":
        return None
    s = ctx.summary
    unit = "CPU ops" if s.cpu_trace else "kernels"
    evidence = [b.why]
    if top := _top_categories(ctx):
        evidence.append(f"{unit} by category: {top}")
    if said := run_uses(ctx).said(ctx.steps):
        evidence.append(said)
    if len(s.kernels):
        k = s.kernels.iloc[0]
        evidence.append(f"the longest: {str(k['name'])[:90]} ({fmt_ns(int(k['total_ns']))}, "
                        f"{int(k['count']):,} calls)")
    return Finding(
        "device_bound", "Device-bound: the step is as long as its device work"
        if not s.cpu_trace else "Compute-bound: the step is as long as its CPU ops",
        evidence,
        f"make the {unit} faster or fewer: the findings below and `traceviz analyze` "
        + ("(the efficiency section holds each op group against the device's peak) say "
           "which; a faster host or fewer launches will not shorten this step"
           if not s.cpu_trace else "(the efficiency section holds each op group's GFLOP/s "
           "and GB/s) say which; less framework overhead will not shorten this step"),
        None, None, {"busy_share": b.share})

