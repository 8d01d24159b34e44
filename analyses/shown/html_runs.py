"""What the explorable report (``report.html``) shows of each run beyond the report's
sections: one step's timeline with its rows on the critical path, the findings and the
scenarios, and the kernel differences between consecutive runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.analyses.advice.advising import Advice, advise_full
from traceviz.analyses.compare.runs import RunFigures, kernel_diff
from traceviz.analyses.critical_path.path import critical_path
from traceviz.analyses.timeline import StepRows, step_rows
from traceviz.analyses.whatif.engine import WhatIf, whatif
from traceviz.errors import TraceVizError

if TYPE_CHECKING:
    from traceviz.opcost.peaks import Peak
    from traceviz.trace import Trace

STEP_BUDGET = 3_000       # device rows drawn per step (and as many launch calls)
DIFF_ROWS = 15            # kernel differences shown per pair of runs


@dataclass
class HtmlRun:
    """A run as the explorable report draws it."""

    label: str
    figures: RunFigures
    timeline: StepRows           # the step of median length
    on_path: np.ndarray          # bool per timeline row: on the step's critical path
    advice: Advice | None        # None: no replay (``replay_error`` says why)
    whatif: WhatIf | None
    replay_error: str = ""


@dataclass
class KernelDifferences:
    """The kernels that changed most from run ``a`` to run ``b`` (``kernel_diff``)."""

    a: str
    b: str
    table: pd.DataFrame


@dataclass
class HtmlRuns:
    runs: list[HtmlRun]
    differences: list[KernelDifferences]   # consecutive runs, none for one run


def html_runs(runs: list[tuple[str, Trace, RunFigures]], peak: Peak | None = None
              ) -> HtmlRuns:
    """Each run's timeline, critical path, findings and scenarios; the differences of
    consecutive runs. ``peak``: the device's peaks the findings and scenarios rate against
    (``--peak``; None: each trace's device's)."""
    shown = [_run(label, trace, fig, peak) for label, trace, fig in runs]
    diffs = [KernelDifferences(la, lb, kernel_diff(ta, tb).head(DIFF_ROWS))
             for (la, ta, _), (lb, tb, _) in zip(runs, runs[1:], strict=False)]
    return HtmlRuns(shown, diffs)


def _run(label: str, trace: Trace, fig: RunFigures, peak: Peak | None) -> HtmlRun:
    timeline = step_rows(trace, STEP_BUDGET)
    on_path = _on_critical_path(trace, timeline.rows)
    try:
        advice, scenarios, error = advise_full(trace, peak), whatif(trace, peak=peak), ""
    except TraceVizError as e:
        advice, scenarios, error = None, None, e.message
    return HtmlRun(label, fig, timeline, on_path, advice, scenarios, error)


def _on_critical_path(trace: Trace, rows: pd.DataFrame) -> np.ndarray:
    """bool per timeline row: on the step's critical path (outlined in the timeline);
    no row drawn: no path looked for."""
    if rows.empty:
        return np.zeros(0, bool)
    try:
        return np.isin(rows["row"].to_numpy(), critical_path(trace).rows)
    except TraceVizError:
        return np.zeros(len(rows), bool)
