"""The ladder's table: each rung's time, its speed-ups, the study's figure, whatif's."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from traceviz.ladder import RungResult
from traceviz.render.fit import Col, fitted_table, left_note

_COLS = (Col("rung", "left"), Col("median\nms"), Col("min - max\nms", drop=4),
         Col("CV", drop=5), Col("first\ncall s", drop=3), Col("x over\nnaive8"),
         Col("x over\nrung below", drop=2), Col("study\nx over below"),
         Col("whatif\nx over naive8", "left", wrap=True), Col("what", "left", drop=1,
                                                                wrap=True))


def _x(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}x"


def ladder_rows(results: list[RungResult]) -> list[list[str]]:
    """One row per rung; the study's notes are marked (*) and printed under the table."""
    rows = []
    for r in results:
        rung = r.rung
        study = "—" if rung.study is None else f"{rung.study:.3g}x"
        if rung.study_note:
            study += " *"
        what_if = _x(r.predicted) + (f": {r.prediction_note}" if r.prediction_note else "")
        if r.median_s is None:
            rows.append([rung.variant, "failed", "", "", "", "", "", study, r.error,
                         rung.what])
            continue
        noisy = " NOISY" if r.noisy else ""
        first = "—" if r.first_call_s is None else f"{r.first_call_s:.2f}"
        if r.compile_s:
            first += f" (compile {r.compile_s:.2f})"
        below = _x(r.step) + (f" ({rung.base})" if rung.base and r.step else "")
        rows.append([rung.variant, f"{r.median_s * 1e3:.2f}{noisy}",
                     f"{(r.min_s or 0) * 1e3:.2f}-{(r.max_s or 0) * 1e3:.2f}",
                     "—" if r.cv is None else f"{100 * r.cv:.1f}%", first, _x(r.speedup),
                     below, study, what_if, rung.what])
    return rows


def ladder_render(results: list[RungResult], title: str, width: int = 120) -> Group:
    t, left = fitted_table(title, _COLS, ladder_rows(results), width)
    parts: list = [t]
    parts += [Text(f"* {r.rung.variant}, the study: {r.rung.study_note}", style="dim")
              for r in results if r.rung.study_note]
    parts += [Text(f"note: {n}", style="dim") for n in sorted({n for r in results
                                                               for n in r.notes})]
    note = left_note(width, left, where="a wider terminal, --width, or --json")
    return Group(*parts) if note is None else Group(*parts, note)
