"""The notebook API: ``TraceAnalysis``, a ``Trace`` whose methods run the analyses and
return their results as tables and ``--json`` dicts, shown as HTML in Jupyter.

``traceviz.load`` returns one. The ``Trace`` it extends (``traceviz/trace.py``) is the
events table and its Parquet form only, imported by every layer; this facade sits above
the analyses and the notebook display (``render/notebook.py``, ``notebook_results.py``),
imported by nothing below them. Each method imports its analysis when called: a notebook
pays for what it asks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from traceviz.trace import Trace

if TYPE_CHECKING:
    from traceviz.opcost.peaks import Peak
    from traceviz.render.notebook import BoundView, SummaryView
    from traceviz.render.notebook_results import (
        AdviceView,
        CriticalPathView,
        EfficiencyView,
        MemoryView,
        WhatifView,
    )


class TraceAnalysis(Trace):
    """A ``Trace`` (its ``events`` table, ``meta``, ``save``/``load``) with the notebook
    API: query tables (``kernels()``, ``launches()``, ``casts()``, ``ops()``,
    ``phases()``, ``host_wait()``) and the figures of the commands (``summary()``,
    ``bound()``, ``efficiency()``, ``memory()``, ``whatif()``, ``critical_path()``,
    ``advise()``). In Jupyter it and its results show as HTML tables."""

    @classmethod
    def of(cls, trace: Trace) -> TraceAnalysis:
        """The notebook API over ``trace``: the same table and metadata, not copied.

        :param trace: a ``Trace`` read by any parser (or already a ``TraceAnalysis``).
        :returns: ``trace`` itself when it is one, else a ``TraceAnalysis`` sharing its
            table (not coerced again)."""
        if isinstance(trace, cls):
            return trace
        new = cls.__new__(cls)
        new.__dict__.update(vars(trace))
        return new

    # -- query tables (docs/api.md) ----------------------------------------------------
    def kernels(self) -> pd.DataFrame:
        """One row per kernel (on a CPU trace: per leaf op doing the work).

        :returns: the ``kernels.parquet`` columns: category, launch call, delay, cast flag
            and ``phase`` among them."""
        from traceviz.analyses.summary.tables import kernel_rows

        return kernel_rows(self)

    def launches(self) -> pd.DataFrame:
        """One row per launch call (kernel, graph, copy, set).

        :returns: the ``launches.parquet`` columns: the call and the device work it
            launched."""
        from traceviz.analyses.summary.launch import launch_table

        return launch_table(self)

    def casts(self) -> pd.DataFrame:
        """The kernels that convert between floating-point formats.

        :returns: the rows of ``kernels()`` that are casts."""
        from traceviz.analyses.summary.tables import cast_table

        return cast_table(self)

    def ops(self) -> pd.DataFrame:
        """Framework ops in their nesting.

        :returns: one row per op with ``depth``, ``is_leaf``, ``self_ns`` and ``parent``:
            sum ``self_ns`` (not ``dur_ns``) to count nested ops once."""
        from traceviz.analyses.summary.tables import op_table

        return op_table(self)

    def phases(self) -> pd.DataFrame:
        """The marked phases (data, forward, backward, optimizer).

        :returns: one row per phase: wall time, device busy, kernels, casts."""
        from traceviz.analyses.summary.tables import phases_of

        return phases_of(self)

    def host_wait(self) -> pd.DataFrame:
        """The time the device waited for the host, by what the host was doing.

        :returns: one row per cause, largest first: ``cause``, ``ns``, ``share`` of the
            host wait, ``names`` (what took it most), ``ranges`` (the user ranges it ran
            in), ``time_ms`` and ``share_pct`` (the same in ms and %); empty on a CPU trace
            or where no launch is in the trace."""
        from traceviz.analyses.summary.figures import summarize

        w = summarize(self).host_wait_split
        columns = ["cause", "ns", "share", "names", "ranges", "time_ms", "share_pct"]
        if w is None:
            return pd.DataFrame(columns=columns)
        total = sum(w.causes.values()) or 1
        rows = [(c, ns, ns / total,
                 list(w.names.loc[w.names["cause"] == c, "name"].head(3)),
                 list(w.ranges.loc[w.ranges["cause"] == c, "range"].head(3)),
                 ns / 1e6, ns * 100 / total)
                for c, ns in w.causes.items() if ns]
        return pd.DataFrame(rows, columns=columns).sort_values(
            "ns", ascending=False, ignore_index=True)

    # -- the commands' figures -----------------------------------------------------------
    def summary(self, top: int = 20) -> SummaryView:
        """The figures of ``traceviz analyze --json``.

        :param top: the kernels listed.
        :returns: a dict (exactly ``analyze --json --top TOP``), shown as tables in a
            notebook, each table a DataFrame with unit-named columns (``kernels_df()``,
            ``categories_df()``, ``phases_df()``, ``totals_df()``, ``host_wait_df()``)."""
        from traceviz.analyses.summary.figures import summarize
        from traceviz.render.notebook import SummaryView

        return SummaryView(summarize(self, with_efficiency=True).to_dict(top=top))

    def efficiency(self, peak: str | None = None) -> EfficiencyView:
        """``analyze --json``'s ``efficiency``: FLOPs, bytes, TFLOP/s, GB/s, % of peak and
        bound per op group and kernel, the run's totals and MFU.

        :param peak: as ``--peak`` (default: the device's row, or the peak the trace
            states).
        :returns: a dict, its tables as DataFrames by ``kernels_df()`` and
            ``groups_df()``."""
        from traceviz.render.notebook_results import EfficiencyView

        return EfficiencyView(self._section("efficiency", peak))

    def memory(self) -> MemoryView:
        """``analyze --json``'s ``memory``: peak allocated, allocated and freed bytes per
        device and phase, and the timed batches' peak (bench.json).

        :returns: a dict, its tables in MiB by ``devices_df()`` and ``phases_df()``."""
        from traceviz.render.notebook_results import MemoryView

        return MemoryView(self._section("memory", None))

    def bound(self) -> BoundView:
        """What bounds the step (``analyze --json``'s ``bound``, ``advise``'s first line).

        :returns: a dict of ``by``, the host's ``cause``, ``why`` and the figures it was
            judged on (``figures_df()``: as a DataFrame in ms and % of the span)."""
        from traceviz.render.notebook import BoundView

        return BoundView(self._section("bound", None))

    def _section(self, name: str, peak: str | None) -> dict[str, Any]:
        """One section of ``summary()``, every row, computed alone."""
        from traceviz.analyses.summary.figures import integer_ns, summarize

        s = summarize(self, with_efficiency=True, peak=_peak(peak))
        # its part of --json with every row listed; {} where the section gives none
        return integer_ns(s.section_json(name, top=1 << 30))[name]

    def whatif(self, *scenarios: str, peak: str | None = None) -> WhatifView:
        """``traceviz whatif --json``: the replay and each scenario.

        :param scenarios: the scenarios to run (default: all), e.g.
            ``t.whatif("cuda_graphs", "gemm_speedup=4")``.
        :param peak: as ``--peak``: the peaks the scenarios that price work at the
            device's peak use (default: the device's row, or the peak the trace states).
        :returns: a dict, the scenarios as a DataFrame by ``scenarios_df()``."""
        from traceviz.analyses.whatif.engine import whatif
        from traceviz.analyses.whatif.scenarios import DEFAULT_SCENARIOS
        from traceviz.render.notebook_results import WhatifView

        return WhatifView(whatif(self, tuple(scenarios) or DEFAULT_SCENARIOS,
                                 peak=_peak(peak)).to_dict())

    def critical_path(self, annotation: str | None = None,
                      top: int = 20) -> CriticalPathView:
        """``analyze --critical-path --json``'s ``critical_path``: per step the path's
        length and parts, the kernels and host calls on it.

        :param annotation: per host range of that name instead of per step.
        :param top: the kernels and host calls listed.
        :returns: a dict, its tables by ``steps_df()``, ``parts_df()``, ``kernels_df()``,
            ``host_calls_df()``."""
        from traceviz.analyses.critical_path.path import critical_path
        from traceviz.render.notebook_results import CriticalPathView

        return CriticalPathView(critical_path(self, annotation).to_dict(top=top))

    def advise(self, peak: str | None = None) -> AdviceView:
        """``traceviz advise --json``'s findings.

        :param peak: as ``--peak``: the peaks the findings that rate work against the
            device's peak use (default: the device's row, or the peak the trace states).
        :returns: a list of dicts (rule, title, evidence, action, saving), one row each in
            ``findings_df()``."""
        from traceviz.analyses.advice.advising import advise
        from traceviz.render.notebook_results import AdviceView

        findings, steps = advise(self, _peak(peak))
        return AdviceView(f.to_dict(steps) for f in findings)

    # -- the notebook display (traceviz/render/notebook.py) ----------------------------
    def __repr__(self) -> str:
        from traceviz.render.escape import visible

        m = self.meta
        kind = "CPU" if self.is_cpu else "GPU"
        what = visible(str(m.get("model") or m.get("source_file") or "?"))
        return (f"<Trace {what} · {visible(str(m.get('source_format', '?')))} · {kind} · "
                f"{len(self.events):,} events>")

    def overview(self) -> dict[str, Any]:
        """What the display shows.

        :returns: source file, profiler, devices, rows per kind (most first), the time the
            rows cover (first start to last end, ns), step marks."""
        ev = self.events
        kinds = ev["kind"].value_counts()
        start, end = (int(ev["ts_ns"].min()), int((ev["ts_ns"] + ev["dur_ns"]).max())) \
            if len(ev) else (0, None)
        return {"source_file": self.meta.get("source_file"),
                "profiler": self.meta.get("profiler"),
                "devices": dict(self.meta.get("devices") or {}),
                "kinds": {str(k): int(n) for k, n in kinds.items() if n},
                "recorded_ns": None if end is None else end - start,
                "step_marks": int(kinds.get("step", 0))}

    def __str__(self) -> str:
        from traceviz.render.notebook import trace_text

        return trace_text(repr(self), self.overview())

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def _repr_html_(self) -> str:
        from traceviz.render.notebook import trace_html

        return trace_html(repr(self), self.overview())


def _peak(spec: str | None) -> Peak | None:
    """``--peak``'s text as the peaks it names (None: the trace's device's)."""
    from traceviz.opcost.peaks import parse_peak

    return parse_peak(spec) if spec else None
