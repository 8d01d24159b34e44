"""A command computes the trace's step windows once and passes them: ``advise`` (its
rules, its summary, every replay it prices with) and ``whatif`` call
``work.analysis_windows`` on the trace they were given once; only the replayed traces,
one per scenario, get windows of their own."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from traceviz import load
from traceviz.analyses.advice.advising import advise_full
from traceviz.analyses.whatif.engine import whatif
from traceviz.analyses.work import analysis_windows
from traceviz.trace import Trace

RUN = Path(__file__).resolve().parent.parent / "sample_traces" / "gpu" / "fused_torch" / "train"


def _windows_of(trace: Trace, command: Callable[[], object]) -> tuple[int, int]:
    """(calls on ``trace``, calls on any other trace) of ``analysis_windows`` while
    ``command`` runs: a profile hook sees the calls that modules made through the
    names they imported."""
    code, mine, other = analysis_windows.__code__, [0], [0]

    def hook(frame, event, arg):  # sys.setprofile's signature
        if event == "call" and frame.f_code is code:
            (mine if frame.f_locals["trace"] is trace else other)[0] += 1

    sys.setprofile(hook)
    try:
        command()
    finally:
        sys.setprofile(None)
    return mine[0], other[0]


def test_advise_and_whatif_compute_the_window_once() -> None:
    trace = load(RUN)
    mine, replayed = _windows_of(trace, lambda: advise_full(trace))
    assert mine == 1 and replayed > 0  # before: 12 on this run, replays aside
    trace = load(RUN)
    mine, replayed = _windows_of(trace, lambda: whatif(trace))
    assert mine == 1 and replayed > 0  # before: 6
