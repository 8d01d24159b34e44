"""Tables that fit the terminal's width without cutting a figure.

A table too wide for the terminal is cropped by rich at the right edge, mid-value
(``14.`` for ``14.9%``). Instead, step by step until it fits: headers break into two lines,
the name column narrows (down to ``NAME_MIN``), then the least needed columns leave, in
their ``drop`` order, and the caller names them in a note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table

from traceviz.units import short_name

NAME_MAX = 24
NAME_MIN = 12


@dataclass(frozen=True)
class Col:
    header: str                     # "\n" where a narrow table breaks it into two lines
    justify: JustifyMethod = "right"
    drop: int = 0                   # leaves a narrow table in this order (1 first); 0 stays
    name: bool = False              # a kernel name: shortened to the width left for it

    @property
    def one_line(self) -> str:
        """The header on one line: "launch-\\nbound" is "launch-bound"."""
        return self.header.replace("-\n", "-").replace("/\n", "/").replace("\n", " ")


def _build(title: str, cols: Sequence[Col], rows: Sequence[Sequence[tuple[Col, str]]],
           two_lines: bool, name_width: int) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for c in cols:
        header = c.header if two_lines else c.one_line
        if c.name:
            t.add_column(header, justify=c.justify, no_wrap=True, overflow="ellipsis",
                         max_width=name_width)
        else:
            t.add_column(header, justify=c.justify, no_wrap=True)
    for row in rows:
        t.add_row(*(short_name(v, name_width) if c.name else v for c, v in row))
    return t


def _width(table: Table) -> int:
    return Console(width=10_000).measure(table).maximum


def fitted_table(title: str, cols: Sequence[Col], rows: Sequence[Sequence[str]],
                 width: int) -> tuple[Table, list[str]]:
    """The table of ``rows`` (one string per column) that fits ``width`` columns, and the
    headers of the columns it leaves out. Where nothing fits, the narrowest form (rich then
    crops it: only below the width of the columns that never leave)."""
    leaving = sorted((i for i, c in enumerate(cols) if c.drop), key=lambda i: cols[i].drop)
    kept = list(range(len(cols)))

    def left_out() -> list[str]:
        return [c.one_line for i, c in enumerate(cols) if i not in kept]

    while True:
        shown = [cols[i] for i in kept]
        cells = [[(cols[i], row[i]) for i in kept] for row in rows]
        for two_lines in (False, True):
            table = _build(title, shown, cells, two_lines, NAME_MAX)
            over = _width(table) - width
            if over <= 0:
                return table, left_out()
        names = max((len(short_name(v, NAME_MAX)) for row in cells for c, v in row if c.name),
                    default=0)
        if names and names - over >= NAME_MIN:
            return _build(title, shown, cells, True, names - over), left_out()
        if not leaving:
            return _build(title, shown, cells, True, NAME_MIN), left_out()
        kept.remove(leaving.pop(0))
