"""Rich tables for `traceviz compare` and `traceviz amp`."""

from __future__ import annotations

import pandas as pd
from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from traceviz.analyses.amp import AmpBreakdown
from traceviz.analyses.compare import RunFigures
from traceviz.schema import CATEGORIES
from traceviz.units import fmt_ns, fmt_pct, short_name


def _secs(x: float | None) -> str:
    return "–" if x is None else f"{x:.4f} s"


def runs_table(runs: list[RunFigures]) -> Table:
    t = Table(title="Runs side by side (device times per profiled step)", box=box.SIMPLE_HEAD,
              title_justify="left")
    t.add_column("metric", no_wrap=True)
    for r in runs:
        t.add_column(r.label, justify="right", no_wrap=True)
    busy = "busy (GPU, or leaf ops on CPU)"
    rows = [
        ("time per batch (median)", [_secs(r.time_per_batch_s) for r in runs]),
        ("sequences/s", ["–" if r.sequences_per_s is None else f"{r.sequences_per_s:,.1f}"
                         for r in runs]),
        (busy, [fmt_ns(r.busy_ns / r.per_step) for r in runs]),
        ("span", [fmt_ns(r.span_ns / r.per_step) for r in runs]),
        ("idle (1 - busy/span; CPU: framework overhead)",
         [fmt_pct(r.idle_fraction) for r in runs]),
        ("  waiting for host (launch-bound)",
         [fmt_pct(r.launch_bound_fraction) for r in runs]),
        ("  work queued", [fmt_ns(None if r.queued_idle_ns is None
                                  else r.queued_idle_ns / r.per_step) for r in runs]),
        ("kernels (leaf ops on CPU)", [f"{r.kernel_count / r.per_step:,.0f}" for r in runs]),
    ]
    rows += [(f"  {c}", [fmt_ns(r.category_ns[c] / r.per_step) for r in runs])
             for c in CATEGORIES if any(r.category_ns[c] for r in runs)]
    rows += [
        ("cast time", [fmt_ns(r.cast_ns / r.per_step) for r in runs]),
        ("tensor-core share (half/bf16)", [fmt_pct(r.tensor_core_share) for r in runs]),
    ]
    for name, values in rows:
        t.add_row(name, *values)
    return t


def diff_table(diff: pd.DataFrame, a: str, b: str, top: int = 12) -> Table:
    t = Table(title=f"Biggest kernel differences per step, A = {a} → B = {b}",
              box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("kernel", no_wrap=True, max_width=48)
    for col, just in (("category", "left"), ("change", "left"), ("A", "right"), ("B", "right"),
                      ("B - A", "right")):
        t.add_column(col, justify=just, no_wrap=True, min_width=len(col))
    for r in diff.head(top).itertuples(index=False):
        t.add_row(short_name(r.name, 48), r.category, r.change, fmt_ns(r.ns_a), fmt_ns(r.ns_b),
                  ("+" if r.delta_ns > 0 else "") + fmt_ns(r.delta_ns))
    counts = diff["change"].value_counts()
    t.caption = ", ".join(f"{counts.get(k, 0)} {k}" for k in
                          ("added", "removed", "faster", "slower", "same"))
    return t


def mpe_render(table: pd.DataFrame) -> Table:
    t = Table(title="Mean percentage error of time per batch (row vs column; negative = the "
                    "column is slower)", box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("")
    for c in table.columns:
        t.add_column(str(c), justify="right", no_wrap=True)
    for label, row in table.iterrows():
        t.add_row(str(label), *("–" if pd.isna(v) else f"{v:+.1f}%" for v in row))
    return t


def amp_render(b: AmpBreakdown, fp32: str, amp: str) -> Group:
    t = Table(title=f"AMP breakdown per step: {fp32} → {amp}", box=box.SIMPLE_HEAD,
              title_justify="left")
    t.add_column("part")
    t.add_column("time", justify="right")
    t.add_row("FP32 span", fmt_ns(b.fp32_span_ns))
    t.add_row("+ cast overhead added", fmt_ns(b.cast_added_ns))
    t.add_row("- matrix (gemm/attention/rnn) time saved", fmt_ns(b.matrix_saved_ns))
    t.add_row("+ idle change (host wait, queued; CPU: framework)", fmt_ns(b.idle_change_ns))
    t.add_row("+ other", fmt_ns(b.other_ns))
    t.add_row("AMP span", fmt_ns(b.amp_span_ns))
    verdict = "faster" if b.span_delta_ns < 0 else "slower"
    line = Text(f"AMP is {fmt_ns(abs(b.span_delta_ns))} per step {verdict}; tensor-core share "
                f"{fmt_pct(b.tensor_core_share_fp32)} → {fmt_pct(b.tensor_core_share_amp)}")
    return Group(t, line)
