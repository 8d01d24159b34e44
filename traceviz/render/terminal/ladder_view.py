"""The ladder's table: per rung and mode the median of the repeats' medians and its
spread, the speed-up over the baseline beside the study's cumulative figure (and its
individual one where the rung compares alone), and whatif's prediction with its error."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from traceviz.ladder.rungs import NO_GRAPH, NOT_CAPTURED, Ladder, RungResult, Timing
from traceviz.render.terminal.fit import Col, fitted_table, left_note

MODE_LABEL = {"eager": "eager", "graph": "graph-replayed"}


def _x(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}x"


def _ms(t: Timing | None) -> str:
    if t is None or not t.ran:
        return "failed" if t and _failed(t) else "—"
    assert t.median_s is not None
    return f"{t.median_s * 1e3:.2f} ms" + (" NOISY" if t.noisy else "")


def _failed(t: Timing) -> bool:
    """A capture that ran and failed (not one never made here, or a mode a rung lacks)."""
    return bool(t.error) and t.error != NOT_CAPTURED and not t.error.startswith(NO_GRAPH)


def _spread(t: Timing | None) -> str:
    return "—" if t is None or t.spread_s is None else f"{t.spread_s * 1e3:.2f} ms"


def _over(t: Timing | None) -> str:
    if t is None or not t.ran:
        return "—"
    return _x(t.x_over_baseline) + (" ?" if t.resolved is False else "")


def _study(r: RungResult) -> tuple[str, str]:
    rung = r.rung
    cum = "—" if rung.cumulative is None else f"{rung.cumulative:.4g}x"
    if rung.alone is None:
        alone = "—"
    elif rung.alone_comparable:
        measured = ", ".join(f"{MODE_LABEL[m]} {_x(t.x_alone)}" for m, t in r.modes.items()
                             if t.x_alone)
        alone = f"{rung.alone:.4g}x over {rung.alone_over}" + (
            f"; measured {measured}" if measured else "")
    else:
        alone = f"({rung.alone:.4g}x) *"
    if rung.study_note and rung.alone_comparable:
        alone += " *"
    return cum, alone


def _predicted(r: RungResult, mode: str) -> str:
    p = r.prediction
    step = getattr(p, f"{mode}_step_s")
    if step is None:
        note = p.note if mode == "eager" or not p.scenario else (p.graph_note or p.note)
        return f"— ({note})" if note else "—"
    err = getattr(p, f"{mode}_error")
    x = getattr(p, f"{mode}_x")
    out = f"{step * 1e3:.2f} ms" + (f", {_x(x)}" if x is not None else "")
    if err is not None:
        out += f", error {100 * err:+.0f}%"
    return out + (f" ({p.scenario})" if mode == "eager" else "")


def ladder_cols(modes: tuple[str, ...]) -> list[Col]:
    """The columns, per mode; a narrow terminal leaves out the description first, the
    cumulative figure of the study and each mode's median last."""
    cols = [Col("rung", "left")]
    for k, m in enumerate(modes):
        cols += [Col(f"{MODE_LABEL[m]}\nmedian", drop=8 if k else 0),
                 Col(f"{MODE_LABEL[m]}\nspread", drop=5),
                 Col(f"{MODE_LABEL[m]}\nx naive8", drop=7 if k else 0)]
    cols += [Col("study\ncumulative", drop=9), Col("study alone", "left", drop=4, wrap=True)]
    cols += [Col(f"whatif {MODE_LABEL[m]}\ntimed step, x naive8", "left", wrap=True,
                 drop=3 if m == "graph" else 6) for m in modes]
    cols += [Col("first\ncall s", drop=2), Col("what", "left", drop=1, wrap=True)]
    return cols


def ladder_rows(ladder: Ladder) -> list[list[str]]:
    rows = []
    for r in ladder.rungs:
        row = [r.rung.variant + (" (reference)" if r.rung.reference else "")]
        for m in ladder.modes:
            t = r.modes.get(m)
            row += [_ms(t), _spread(t), _over(t)]
        row += list(_study(r))
        row += [_predicted(r, m) for m in ladder.modes]
        eager = r.modes.get("eager")
        first = "—" if eager is None or eager.first_call_s is None else \
            f"{eager.first_call_s:.2f}"
        if eager is not None and eager.compile_s:
            first += f" (compile {eager.compile_s:.2f})"
        row += [first, r.rung.what]
        rows.append(row)
    return rows


def ladder_footnotes(ladder: Ladder) -> list[str]:
    lines = []
    if any(t.spread_s is not None for r in ladder.rungs for t in r.modes.values()):
        lines.append(f"median: of the {ladder.repeats} repeats' timed medians; spread: their "
                     "max - min; ? : the step from the rung below is within the spread "
                     "(not resolved)")
    else:
        lines.append("median: the timed median of one repeat (--repeat N gives a spread)")
    added = [r.rung.variant for r in ladder.rungs
             if r.rung.alone is not None and not r.rung.alone_comparable]
    if added:
        lines.append(f"(x) *: the study's figure for the optimization alone over its baseline; "
                     f"{', '.join(added)} add{'s it' if len(added) == 1 else ' theirs'} to "
                     "the rungs below: compare the cumulative figure")
    lines += [f"* {r.rung.variant}: {r.rung.study_note}" for r in ladder.rungs
              if r.rung.study_note]
    for m in ladder.modes:
        absent = [r.rung.variant for r in ladder.rungs
                  if (t := r.modes.get(m)) is not None and t.error == NOT_CAPTURED]
        if absent:
            has_mode = [r for r in ladder.rungs if not (m == "graph" and r.rung.no_graph)]
            which = "every rung" if len(absent) == len(has_mode) else ", ".join(absent)
            lines.append(f"{MODE_LABEL[m]}: not captured in this folder ({which})")
        lines += [f"{r.rung.variant} ({MODE_LABEL[m]}): {t.error}" for r in ladder.rungs
                  if (t := r.modes.get(m)) is not None and _failed(t)]
    lines += [f"note: {n}" for n in ladder.notes]
    lines += [f"note: {n}" for n in sorted({n for r in ladder.rungs for n in r.notes})]
    return lines


def ladder_render(ladder: Ladder, title: str, width: int = 120) -> Group:
    t, left = fitted_table(title, ladder_cols(ladder.modes), ladder_rows(ladder), width)
    parts: list = [t] + [Text(line, style="dim") for line in ladder_footnotes(ladder)]
    note = left_note(width, left, where="a wider terminal, --width, or --json")
    return Group(*parts) if note is None else Group(*parts, note)
