"""The notebook display of the other results the notebook API (``TraceAnalysis``)
returns: ``efficiency()``, ``memory()``, ``whatif()`` (dicts) and ``advise()`` (a list),
each still the ``--json`` value it was, with HTML, a few lines of text and its tables as
DataFrames in named units (``frames.py``). Names a trace controls are escaped as in ``notebook.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from traceviz.render import frames
from traceviz.render.escape import html_text, visible
from traceviz.render.notebook import Shown, cut, section_html, table_html
from traceviz.units import fmt_ns, fmt_pct

TOP_LINES = 3  # rows of a table the text display names


def _notes_html(notes: list[str] | None) -> list[str]:
    return [f"<div><i>{html_text(n)}</i></div>" for n in notes or []]


def _tables_html(shown: list[tuple[str, pd.DataFrame, list[str] | None]]) -> list[str]:
    return [section_html(title, table_html(df, cols)) for title, df, cols in shown if len(df)]


class EfficiencyView(Shown, dict[str, Any]):
    """``analyze --json``'s ``efficiency``: FLOPs, bytes and rates per kernel and op group
    (``kernels_df()``, ``groups_df()``: ``time_ms``, ``tflops``, ``gbps``, ``peak_pct``)."""

    _tables = ".kernels_df() .groups_df()"

    def kernels_df(self) -> pd.DataFrame:
        """Per kernel: ``time_ms``, ``flops``, ``bytes``, ``tflops``, ``peak_pct``..."""
        return frames.efficiency_kernels_frame(self)

    def groups_df(self) -> pd.DataFrame:
        """Per op group: the kernels' columns with ``op``, ``dims``, ``types``."""
        return frames.efficiency_groups_frame(self)

    def _title(self) -> str:
        run = self.get("run") or {}
        parts = ["efficiency", str(self.get("device") or "no device named")]
        if run.get("tflops_busy") is not None:
            parts.append(f"{run['tflops_busy']:.3f} TFLOP/s while busy")
        if run.get("mfu") is not None:
            parts.append(f"MFU {fmt_pct(run['mfu'])}")
        return " · ".join(parts)

    def _lines(self) -> list[str]:
        return [f"{cut(k['kernel'])} {fmt_ns(k['time_ns'])} · {k['tflops']:.3f} TFLOP/s"
                f"{' · ' + fmt_pct(k['pct_peak']) + ' of peak' if k.get('pct_peak') else ''}"
                for k in (self.get("kernels") or [])[:TOP_LINES]]

    def _parts(self) -> list[str]:
        cols = ["precision", "kernels", "time_ms", "tflops", "gbps", "peak_pct", "bw_pct",
                "bound"]
        return _tables_html([("Kernels", self.kernels_df(), ["kernel", *cols]),
                             ("Op groups", self.groups_df(), ["op", *cols])]) \
            + _notes_html(self.get("notes"))


class MemoryView(Shown, dict[str, Any]):
    """``analyze --json``'s ``memory``: the allocator per device and phase
    (``devices_df()``, ``phases_df()``: ``*_mib``)."""

    _tables = ".devices_df() .phases_df()"

    def devices_df(self) -> pd.DataFrame:
        """Per device (-1: host): ``events``, ``peak_allocated_mib``, ``allocated_mib``..."""
        return frames.memory_devices_frame(self)

    def phases_df(self) -> pd.DataFrame:
        """Per device and phase: ``events``, ``allocated_mib``, ``freed_mib``."""
        return frames.memory_phases_frame(self)

    def _title(self) -> str:
        n = len(self.get("devices") or [])
        return f"memory · {n} device{'' if n == 1 else 's'} with allocator events"

    def _lines(self) -> list[str]:
        lines = [f"device {r.device}: peak {r.peak_allocated_mib:,.2f} MiB, "
                 f"{r.events:,} events" for r in self.devices_df().itertuples()]
        return lines + [visible(str(n)) for n in self.get("notes") or []]

    def _parts(self) -> list[str]:
        return _tables_html([("Per device", self.devices_df(), None),
                             ("Per phase", self.phases_df(), None)]) \
            + _notes_html(self.get("notes"))


class WhatifView(Shown, dict[str, Any]):
    """``traceviz whatif --json``: the replay and each scenario's prediction
    (``scenarios_df()``: ``predicted_ms``, ``saving_ms``, ``saving_pct``...)."""

    _tables = ".scenarios_df()"

    def scenarios_df(self) -> pd.DataFrame:
        """Per scenario: ``applies``, ``predicted_ms``, ``saving_ms``, ``saving_pct``..."""
        return frames.scenarios_frame(self)

    def _title(self) -> str:
        return (f"whatif · measured {fmt_ns(self.get('measured_ns'))} · replay error "
                f"{fmt_pct(self.get('replay_error'))} · "
                f"{len(self.get('scenarios') or [])} scenarios")

    def _lines(self) -> list[str]:
        best = sorted((s for s in self.get("scenarios") or [] if s.get("saving_ns")),
                      key=lambda s: -s["saving_ns"])
        return [f"{visible(s['name'])}: saves {fmt_ns(s['saving_ns'])} "
                f"({fmt_pct(s.get('saving_fraction'))})" for s in best[:TOP_LINES]]

    def _parts(self) -> list[str]:
        return _tables_html([("Scenarios", self.scenarios_df(), None)])


class AdviceView(Shown, list[dict[str, Any]]):
    """``traceviz advise --json``'s findings: a list of dicts, shown as the findings with
    their evidence; ``findings_df()`` one row each (``saving_ms``...)."""

    _tables = ".findings_df()"

    def findings_df(self) -> pd.DataFrame:
        """Per finding: ``rule``, ``title``, ``saving_ms``, ``saving_per_step_ms``..."""
        return frames.findings_frame(self)

    def _title(self) -> str:
        return f"advice · {len(self)} finding{'' if len(self) == 1 else 's'}"

    def _lines(self) -> list[str]:
        return [f"{i}. {visible(f['title'])}"
                + (f" (saves {fmt_ns(f['saving_ns'])})" if f.get("saving_ns") else "")
                for i, f in enumerate(self, 1)]

    def _parts(self) -> list[str]:
        def one(f: Mapping[str, Any]) -> str:
            saving = f" · saves {fmt_ns(f['saving_ns'])}" if f.get("saving_ns") else ""
            evidence = "".join(f"<li>{html_text(e)}</li>" for e in f.get("evidence") or [])
            return (f"<div><b>{html_text(f['title'])}</b> <small>{html_text(f['rule'])}"
                    f"{html_text(saving)}</small></div><ul>{evidence}</ul>"
                    f"<div>{html_text(f.get('action') or '')}</div>")

        return [one(f) for f in self]



class CriticalPathView(Shown, dict[str, Any]):
    """``analyze --critical-path --json``'s ``critical_path``: per window the path's length
    and its parts, the kernels and host calls on it (``steps_df()``, ``parts_df()``,
    ``kernels_df()``, ``host_calls_df()``)."""

    _tables = ".steps_df() .parts_df() .kernels_df() .host_calls_df()"

    def steps_df(self) -> pd.DataFrame:
        """Per window: ``length_ms`` and ``host_ms``, ``launch_ms``, ``device_ms``..."""
        return frames.path_steps_frame(self)

    def parts_df(self) -> pd.DataFrame:
        """Per part: ``time_ms``, ``per_window_ms``, ``share_pct`` of the length."""
        return frames.path_parts_frame(self)

    def kernels_df(self) -> pd.DataFrame:
        """The kernels on the path: ``time_ms``, ``on_path_ms``, ``share_pct``..."""
        return frames.path_kernels_frame(self)

    def host_calls_df(self) -> pd.DataFrame:
        """The host calls on the path: ``on_path_ms``, ``on_path_per_window_ms``."""
        return frames.path_host_calls_frame(self)

    def _title(self) -> str:
        n = self.get("windows") or 0
        per = (self.get("per_window") or {}).get("length")
        return (f"critical path · {n} {self.get('unit', 'step')} window{'' if n == 1 else 's'}"
                + (f" · {fmt_ns(per)} each" if per else ""))

    def _lines(self) -> list[str]:
        parts = [f"{p} {fmt_ns(t * 1e6)} ({s:.1f}%)" for p, t, _, s in
                 self.parts_df().itertuples(index=False) if t]
        calls = [f"{cut(c['name'])} {fmt_ns(c['on_path_ns'])}"
                 for c in (self.get("host_calls") or [])[:TOP_LINES]]
        return ([" · ".join(parts)] if parts else []) + (
            ["host calls on it: " + "; ".join(calls)] if calls else [])

    def _parts(self) -> list[str]:
        return _tables_html([("Parts of the path", self.parts_df(), None),
                             ("Per window", self.steps_df(), None),
                             ("Kernels on the path", self.kernels_df(), None),
                             ("Host calls on the path", self.host_calls_df(), None)]) \
            + _notes_html(self.get("notes"))
