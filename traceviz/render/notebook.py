"""The notebook display: a trace, its ``summary()`` and ``bound()`` (the notebook API,
``traceviz/notebook_api.py``) as HTML (Jupyter's ``_repr_html_``) and as a few lines of
text (``print``, IPython).

``SummaryView`` and ``BoundView`` are the dicts ``TraceAnalysis.summary()`` and
``.bound()`` return: the same keys and integer-nanosecond values as ``analyze --json``, plus the
display and the unit-named tables of ``frames.py`` (``summary.kernels_df()``...). Every
name a trace controls goes through ``escape.html_text`` (HTML) or ``escape.visible``
(text): a kernel named ``<script>`` shows as text. Nothing here runs an analysis.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from traceviz.render import frames
from traceviz.render.escape import html_text, visible
from traceviz.units import fmt_ns, fmt_pct

NAME_CHARS = 60  # a name in the text display is cut here (the HTML shows it whole)
HTML_ROWS = 10   # rows of a table the HTML shows; the DataFrame has them all


def cut(name: object, most: int = NAME_CHARS) -> str:
    text = visible(str(name))
    return text if len(text) <= most else text[: most - 1] + "…"


# -- tables ------------------------------------------------------------------------------
def _cell(column: str, v: Any) -> str:
    """One figure as the table shows it, by its column's unit."""
    if isinstance(v, np.generic):  # a DataFrame's cell: numpy's int64, float64, bool_
        v = v.item()
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return html_text(v)
    if column.endswith("_ms"):
        return f"{v:,.3f}"
    if column.endswith(("_us", "_pct")):
        return f"{v:,.1f}"
    return f"{v:,}" if isinstance(v, int) else f"{v:,.3g}"


def table_html(frame: pd.DataFrame, columns: list[str] | None = None,
               rows: int = HTML_ROWS) -> str:
    """``frame`` (its ``columns``, its first ``rows`` rows) as an HTML table, every cell
    and header escaped; a line says how many rows were left out."""
    columns = [c for c in (columns or list(frame.columns)) if c in frame.columns]
    head = "".join(f"<th>{html_text(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(
            f'<td style="text-align:{"left" if isinstance(v, str) else "right"}">'
            f"{_cell(c, v)}</td>" for c, v in zip(columns, rec, strict=True)) + "</tr>"
        for rec in frame[columns].head(rows).itertuples(index=False, name=None))
    more = (f"<div><i>{len(frame) - rows:,} more rows in the DataFrame</i></div>"
            if len(frame) > rows else "")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def section_html(title: str, inner: str) -> str:
    """A titled part of a display (the title escaped, ``inner`` already HTML)."""
    return f'<div style="margin-top:0.6em"><b>{html_text(title)}</b></div>{inner}'


def page_html(header: str, parts: list[str], hint: str) -> str:
    """One display: ``header`` (HTML), its ``parts`` (HTML), a ``hint`` line (text)."""
    body = "".join(parts)
    return (f'<div class="traceviz"><div style="font-size:1.1em"><b>{header}</b></div>'
            f"{body}<div><small>{html_text(hint)}</small></div></div>")


# -- Trace -------------------------------------------------------------------------------
TRACE_HINT = "t.summary() · t.kernels() · t.bound() · t.host_wait()"


def _trace_facts(overview: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) lines of a Trace's ``overview()``: its source, devices, rows by kind,
    the time it covers."""
    o = overview
    facts = [("source", f"{o.get('source_file') or '?'} ({o.get('profiler') or '?'})")]
    if devices := o.get("devices"):
        facts.append(("devices", "; ".join(f"{d}: {n}" for d, n in devices.items())))
    facts.append(("events", " · ".join(f"{n:,} {k}" for k, n in o["kinds"].items())))
    if o.get("recorded_ns") is not None:
        marks = o.get("step_marks") or 0
        facts.append(("time", f"{fmt_ns(o['recorded_ns'])} recorded"
                      + (f" · {marks:,} step marks" if marks else "")))
    return facts


def trace_text(first: str, overview: Mapping[str, Any]) -> str:
    """A Trace in a few lines: ``first`` (its one-line repr), then its ``overview``."""
    lines = [first] + [f"  {label:<8} {visible(text)}" for label, text
                       in _trace_facts(overview)]
    return "\n".join([*lines, f"  {'tables':<8} {TRACE_HINT}"])


def trace_html(first: str, overview: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><th style='text-align:left'>{html_text(label)}</th>"
                   f"<td style='text-align:left'>{html_text(text)}</td></tr>"
                   for label, text in _trace_facts(overview))
    return page_html(html_text(first), [f"<table>{rows}</table>"], TRACE_HINT)


# -- the results' views ---------------------------------------------------------------
class Shown:
    """The display every result view shares: ``_title`` (one line), ``_lines`` (the text
    below it), ``_parts`` (the HTML below it) and ``_tables``, the accessors it names.
    ``repr`` is the title alone; ``print`` and IPython show the lines; Jupyter the HTML."""

    _tables = ""

    def _title(self) -> str:
        raise NotImplementedError

    def _lines(self) -> list[str]:
        raise NotImplementedError

    def _parts(self) -> list[str]:
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return page_html(html_text(f"traceviz {self._title()}"), self._parts(),
                         f"tables: {self._tables}")

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def __str__(self) -> str:
        return "\n".join([f"<traceviz {visible(self._title())}>",
                          *("  " + x for x in self._lines()), f"  tables: {self._tables}"])

    def __repr__(self) -> str:
        return f"<traceviz {visible(self._title())}>"


def _verdict(bound: Mapping[str, Any] | None) -> str:
    if not bound or not bound.get("by"):
        return ""
    cause = f" ({bound['cause']})" if bound.get("cause") else ""
    return f"bound by {bound['by']}{cause}: {bound.get('why', '')}"


class SummaryView(Shown, dict[str, Any]):
    """``analyze --json``'s figures: a dict (integer ``*_ns``, fractions), shown in a
    notebook as tables, with each table as a DataFrame whose columns name their unit
    (``*_ms`` totals, ``*_us`` one call, ``*_pct`` shares)."""

    _tables = ".totals_df() .kernels_df() .categories_df() .phases_df() .host_wait_df()"

    def totals_df(self) -> pd.DataFrame:
        """Span, busy, idle, host wait, queued idle: ``time_ms``, ``share_pct`` of span."""
        return frames.totals_frame(self)

    def kernels_df(self) -> pd.DataFrame:
        """The top kernels (CPU: work ops): ``count``, ``time_ms``, ``share_pct``..."""
        return frames.kernels_frame(self)

    def categories_df(self) -> pd.DataFrame:
        """Kernel time per category: ``count``, ``time_ms``, ``share_pct``."""
        return frames.categories_frame(self)

    def phases_df(self) -> pd.DataFrame:
        """Per phase: ``wall_ms``, ``busy_ms``, ``kernels``, ``kernel_ms``..."""
        return frames.phases_frame(self)

    def host_wait_df(self) -> pd.DataFrame:
        """The host wait by cause: ``time_ms``, ``per_step_ms``, ``share_pct``."""
        return frames.host_wait_frame(self.get("host_wait_split"))

    def _title(self) -> str:
        steps = self.get("steps")
        return " · ".join(filter(None, [
            f"summary · {str(self.get('trace_type', '?')).upper()} trace",
            f"{steps:,} steps" if steps else "", f"span {fmt_ns(self.get('span_ns'))}"]))

    def _lines(self) -> list[str]:
        lines = []
        if parts := [f"{f} {fmt_ns(t * 1e6)} ({p:.1f}%)" for f, t, p in
                     self.totals_df().itertuples(index=False) if f != "span" and p == p]:
            lines.append(" · ".join(parts))
        if verdict := _verdict(self.get("bound")):
            lines.append(visible(verdict))
        if top := self.get("top_kernels"):
            lines.append(f"top kernel {cut(top[0]['name'])} {fmt_ns(top[0]['total_ns'])} "
                         f"({fmt_pct(top[0].get('share'))} of kernel time)")
        return lines

    def _parts(self) -> list[str]:
        parts = []
        if verdict := _verdict(self.get("bound")):
            parts.append(f"<div>{html_text(verdict)}</div>")
        parts.append(section_html("Where the span went", table_html(self.totals_df())))
        kernels = self.kernels_df()
        if len(kernels):
            parts.append(section_html(
                "Top work ops" if self.get("trace_type") == "cpu" else "Top kernels",
                table_html(kernels, ["rank", "name", "category", "count", "time_ms",
                                     "share_pct", "mean_us"])))
        cats = self.categories_df()
        if len(cats := cats[cats["count"] > 0] if len(cats) else cats):
            parts.append(section_html("Kernel time by category", table_html(cats)))
        if len(waits := self.host_wait_df()):
            parts.append(section_html("Host wait by cause", table_html(waits)))
        return parts


class BoundView(Shown, dict[str, Any]):
    """What bounds the step (``analyze --json``'s ``bound``), shown in a notebook with the
    figures it was judged on (``figures_df()``: ``time_ms``, ``share_pct`` of span)."""

    _tables = ".figures_df()"

    def figures_df(self) -> pd.DataFrame:
        """The figures the verdict was judged on: ``figure``, ``time_ms``, ``share_pct``."""
        return frames.bound_frame(self)

    def _title(self) -> str:
        if not self.get("by"):
            return "no verdict"
        cause = f" ({self['cause']})" if self.get("cause") else ""
        share = f" · {fmt_pct(self['share'])}" if self.get("share") is not None else ""
        return f"bound by {self['by']}{cause}{share}"

    def _lines(self) -> list[str]:
        why = [visible(str(self["why"]))] if self.get("why") else []
        return why + [f"{f:<24} {fmt_ns(t * 1e6)}" for f, t, _ in
                      self.figures_df().itertuples(index=False) if t]

    def _parts(self) -> list[str]:
        parts = [f"<div>{html_text(self.get('title') or '')}: "
                 f"{html_text(self.get('why') or '')}</div>"]
        figures = self.figures_df()
        if len(shown := figures[figures["time_ms"] != 0]):
            parts.append(table_html(shown, rows=len(shown)))
        if zero := len(figures) - len(shown):
            parts.append(f"<div><i>{zero} figures of 0 ms left out here</i></div>")
        return parts
