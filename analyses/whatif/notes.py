"""What a what-if scenario's result says in words: its saving held against the critical
path, what it does to work on several streams (why a scenario does not apply, or changes
nothing, is its row's in ``scenarios.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:  # types only
    from traceviz.analyses.replay.graph import ReplayGraph
    from traceviz.trace import Trace


def path_check(saving: int, removed: int, steps: int) -> str:
    """The saving held against what the scenario takes off the critical path."""
    from traceviz.units import fmt_ns

    per = max(steps, 1)
    unit = "per step" if steps else "in the trace"
    off = f"it takes {fmt_ns(removed / per)} {unit} off the critical path as replayed"
    # the saving as the table prints it, so that the two figures read side by side
    own = f"the saving, {fmt_ns(saving / per)} {unit},"
    if removed <= 0:
        return off + (f"; {own} comes from work off the path" if saving > 0 else
                      ": the path does not get shorter")
    if saving <= removed * 1.02:
        return off + (f"; {own} is about that much" if saving >= removed * 0.98 else
                      f"; {own} is less: once it is shorter, another chain bounds the step")
    return off + f"; {own} is more: it also shortens chains that then bound the step"



def cross_stream_caveat(trace: Trace, base: ReplayGraph, changed: ReplayGraph,
                        steps: int, windows: dict | None = None) -> str:
    """What a scenario does to work on several streams, in one line ("" where it leaves
    it alone): fewer streams on a device serialize work that overlapped, and waits across
    streams that go let work start before what it waited for. ``--brief`` shows it: a
    saving or a loss from that alone is no optimization of the work itself. ``windows``:
    the trace's analysis windows (computed here when not given)."""
    from traceviz.analyses.summary.stream_overlap import stream_overlap
    from traceviz.analyses.work import analysis_windows, work_rows
    from traceviz.units import fmt_ns, plural

    def streams(g: ReplayGraph) -> int:
        live = ~g.d_removed
        return int(pd.Series(g.d_stream[live]).groupby(g.d_device[live]).nunique().sum())

    said = []
    before, after = streams(base), streams(changed)
    if after < before:
        work = work_rows(trace)
        windows = analysis_windows(trace, work) if windows is None else windows
        multi = sum(o.multi_ns for o in stream_overlap(work, windows))
        said.append(f"serializes {plural(before, 'stream')} onto {after}: "
                    f"{fmt_ns(multi / max(steps, 1))} per step that ran on 2+ streams at "
                    "once now runs one after another")
    waits = int((base.d_dep >= 0).sum()) - int((changed.d_dep >= 0).sum())
    if waits > 0 and after == before:  # serialized, a wait became program order
        said.append(f"removes {plural(waits, 'cross-stream wait')}: work starts without "
                    "waiting for the other stream's (correct only where it did not need it)")
    return "; ".join(said)
