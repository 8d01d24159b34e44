"""A report's figures for its sections (``traceviz report``): the runs' figures and what
compares them (workload differences, ordering conflicts, MPE, AMP breakdowns), and the
sweeps' tables. ``render/report/`` writes them up as Markdown or HTML."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from traceviz.analyses.compare.amp_breakdown import AmpBreakdown, amp_breakdown, amp_pairs
from traceviz.analyses.compare.mpe import MpeBothWays, mpe_readings
from traceviz.analyses.compare.runs import (
    RunFigures,
    mpe_table,
    ordering_conflicts,
    shape_text,
    workload_differences,
)


@dataclass
class AmpPair:
    """A full-precision run, its mixed-precision twin and where their step time went."""

    fp32: RunFigures
    amp: RunFigures
    breakdown: AmpBreakdown


@dataclass
class ReportData:
    """Everything ``build_report`` writes up; no run (sweeps only): empty comparisons."""

    runs: list[RunFigures]
    sweeps: list[tuple[str, pd.DataFrame]]      # (label, sweep table)
    shapes: list[str] = field(default_factory=list)          # per run: its workload shape
    workload_differences: list[str] = field(default_factory=list)
    ordering_conflicts: list[str] = field(default_factory=list)
    mpe: pd.DataFrame | None = None             # runs x runs, None under two runs
    mpe_readings: list[MpeBothWays] = field(default_factory=list)
    amp: list[AmpPair] = field(default_factory=list)


def report_data(runs: list[RunFigures], sweeps: list[tuple[str, pd.DataFrame]]
                ) -> ReportData:
    """The report's figures of ``runs`` (their ``RunFigures``) and ``sweeps``."""
    data = ReportData(runs, sweeps)
    if not runs:
        return data
    data.shapes = [shape_text(f.meta.get("workload") or {}) for f in runs]
    data.workload_differences = workload_differences(runs)
    data.ordering_conflicts = ordering_conflicts(runs)
    mpe = mpe_table(runs)
    if len(mpe) > 1:
        data.mpe = mpe
        data.mpe_readings = mpe_readings(runs, mpe)
    data.amp = [AmpPair(a, b, amp_breakdown(a, b)) for a, b in amp_pairs(runs)]
    return data
