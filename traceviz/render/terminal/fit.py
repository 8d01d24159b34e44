"""Tables that fit the terminal's width without cutting a figure.

A table too wide for the terminal is cropped by rich at the right edge, mid-value
(``14.`` for ``14.9%``). Instead, step by step until it fits: headers break into two lines,
the name columns narrow (down to ``NAME_MIN``), then the least needed columns leave, in
their ``drop`` order, and the caller names them in a note. A name is never folded onto
more lines: it is cut on one line (a kernel's to its distinct short form, a name as
recorded around a middle ``…`` that keeps its end).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.control import strip_control_codes
from rich.table import Table
from rich.text import Text

from traceviz.render.escape import console_text, visible
from traceviz.table.names import distinct_labels, distinct_names

NAME_WIDE = 60  # a name column's most
NAME_MAX = 24   # columns leave before a name gets narrower than this
NAME_MIN = 12
WRAP_MIN = 24   # a wrapping column (a description) is never squeezed below this


@dataclass(frozen=True)
class Col:
    header: str                     # "\n" where a narrow table breaks it into two lines
    justify: JustifyMethod = "right"
    drop: int = 0                   # leaves a narrow table in this order (1 first); 0 stays
    name: bool = False              # a kernel name: shortened to the width left for it
    label: bool = False             # a name as recorded (a range, a module): cut in the middle
    wrap: bool = False              # words wrap onto more lines (a description, a label)
    lines: bool = False             # traceviz's own lines (each escaped): its breaks kept

    @property
    def one_line(self) -> str:
        """The header on one line: "launch-\\nbound" is "launch-bound"."""
        return self.header.replace("-\n", "-").replace("/\n", "/").replace("\n", " ")

    @property
    def named(self) -> bool:
        """A name column: on one line, cut to the width the names are given."""
        return self.name or self.label


def _names(c: Col, values: tuple[str, ...], width: int, wide: bool) -> tuple[str, ...]:
    """A name column's cells as shown at ``width``: kernel names told apart in their short
    forms (with ``wide``, as recorded where that fits); names as recorded (a range, a
    module) cut in the middle."""
    if not c.name:
        return _labels(values, width)
    short = _distinct(values, width)
    return tuple(v if wide and len(v) <= width else s
                 for v, s in zip(values, short, strict=True))


def _build(title: str, cols: Sequence[Col], rows: Sequence[Sequence[tuple[Col, str]]],
           two_lines: bool, name_width: int, wide: bool = False, measuring: bool = False,
           caption: str | None = None) -> Table:
    """The table; ``measuring``: wrapping cells cut to the width they may shrink to, so
    that the table's measure is the least it needs."""
    t = Table(title=visible(title), box=box.SIMPLE_HEAD, title_justify="left", caption=caption,
              caption_justify="left")
    for c in cols:
        header = c.header if two_lines else c.one_line
        if c.wrap and not c.named:
            t.add_column(header, justify=c.justify, overflow="fold")
        elif c.named:
            t.add_column(header, justify=c.justify, no_wrap=True, overflow="ellipsis",
                         max_width=name_width)
        else:
            t.add_column(header, justify=c.justify, no_wrap=True)
    names = {k: _names(c, tuple(row[k][1] for row in rows), name_width, wide)
             for k, c in enumerate(cols) if c.named}
    for r, row in enumerate(rows):
        cells = []
        for k, (c, v) in enumerate(row):
            if k in names:
                v = names[k][r]
            elif c.wrap and measuring:
                v = v[:WRAP_MIN]
            cells.append(Text(v))  # names from traces are text, never rich markup
        t.add_row(*cells)
    return t


@functools.lru_cache(maxsize=64)
def _distinct(names: tuple[str, ...], width: int) -> tuple[str, ...]:
    """``distinct_names``, once per table's names and width: a table is built several
    times while it is fitted."""
    return tuple(distinct_names(list(names), width))


@functools.lru_cache(maxsize=64)
def _labels(names: tuple[str, ...], width: int) -> tuple[str, ...]:
    """``distinct_labels``, once per table's names and width."""
    return tuple(distinct_labels(names, width))


def _width(table: Table) -> int:
    """The width rich gives ``table`` with room to spare, from its cells' text: rich's own
    measure renders every cell several times (a summary's tables, measured a few times
    each while they are fitted, cost more than printing them). Rich's rule: per column the
    longest line of its header and cells plus its padding, at most its ``max_width`` plus
    the padding, and the box's edges and separators (``measured_width`` is rich's own)."""
    widths = _column_widths(table)
    if widths is None:  # markup, or anything but text: rich measures it
        return measured_width(table)
    return table._extra_width + sum(widths)  # noqa: SLF001 (rich's edges and separators)


def _column_widths(table: Table) -> list[int] | None:
    """Per column, the width rich gives it with room to spare (its padding included), by
    ``_width``'s rule; None where rich must measure it."""
    _, right, _, left = table.padding
    out = []
    for col in table.columns:
        texts = [_plain(c) for c in (col.header, *col.cells)]
        if col.width is not None or table.collapse_padding or not table.pad_edge or \
                None in texts:
            return None
        w = max(max((cell_len(line) for line in str(t).splitlines()), default=0)
                for t in texts) + left + right
        out.append(w if col.max_width is None else min(w, col.max_width + left + right))
    return out


def pinned(table: Table, width: int) -> Table:
    """``table`` with each column's width fixed at the width rich gives it when printed
    ``width`` columns wide, where it fits them (it then prints the same text): rich takes
    a fixed width as it is, where it would measure every cell again (a fifth of printing
    a summary)."""
    widths = _column_widths(table)
    if widths is None or table._extra_width + sum(widths) > width:  # noqa: SLF001
        return table  # rich shares out the width itself
    _, right, _, left = table.padding
    for col, w in zip(table.columns, widths, strict=True):
        col.width = w - left - right
    return table


def _plain(cell: object) -> str | None:
    """A cell's text as rich shows it; None where rich would read markup or render it."""
    if isinstance(cell, Text):
        return cell.plain
    return cell if isinstance(cell, str) and "[" not in cell else None


def measured_width(table: Table) -> int:
    """Rich's measure of ``table``'s widest form."""
    return Console(width=10_000).measure(table).maximum


def fitted_table(title: str, cols: Sequence[Col], rows: Sequence[Sequence[str]],
                 width: int, wide: bool = False, caption: str | None = None,
                 name_least: int = NAME_MAX) -> tuple[Table, list[str]]:
    """The table of ``rows`` (one string per column) that fits ``width`` columns, and the
    headers of the columns it leaves out. Names are told apart (``names.distinct_names``)
    and have priority: they get up to ``NAME_WIDE`` columns, and columns leave before a
    name gets under ``name_least`` (under ``NAME_MIN`` only where every column left is one
    that never leaves, so that no figure is cut). ``wide`` shows names as
    recorded, whole where the width holds them, and columns leave before a name gets
    under half the width. A name is on one line at every width. Where nothing fits, the
    narrowest form (rich then crops it: only below the width of the columns that never
    leave)."""
    rows = _shown(cols, rows)
    leaving = sorted((i for i, c in enumerate(cols) if c.drop), key=lambda i: cols[i].drop)
    kept = list(range(len(cols)))
    # names as shown at the most width: told apart, a name may be longer than its short form
    cap = max(NAME_MAX, width - 8) if wide else NAME_WIDE
    longest = max((len(v) for k, c in enumerate(cols) if c.named
                   for v in _names(c, tuple(row[k] for row in rows), cap, wide)), default=0)
    most = min(longest, cap)
    least = min(most, max(name_least, width // 2)) if wide else min(most, name_least)

    def build(shown: list[Col], cells: list, two: bool, name_width: int,
              measuring: bool = False) -> Table:
        return _build(title, shown, cells, two, name_width, wide, measuring, caption)

    # each form tried is measured from the columns' text widths, taken once: building
    # and measuring a table per form cost more than printing the one chosen
    sizes = _Sizes.of(cols, rows, most, wide)
    while True:
        shown = [cols[i] for i in kept]
        cells = [[(cols[i], row[i]) for i in kept] for row in rows]
        names = longest and any(c.named for c in shown)
        for two_lines in (False, True):
            over = _form_width(sizes, kept, two_lines) - width
            if over <= 0:
                return build(shown, cells, two_lines, most), _left(cols, kept)
            room = _name_room(sizes, kept, two_lines, over) if names else 0
            if names and room >= least:  # the names give up what is over
                return build(shown, cells, two_lines, room), _left(cols, kept)
        if not leaving:
            # names under NAME_MIN only where that keeps every figure whole
            narrow = (min(room, least) if room >= NAME_MIN else room or NAME_MIN) \
                if names else most
            return build(shown, cells, True, narrow), _left(cols, kept)
        kept.remove(leaving.pop(0))


@dataclass(frozen=True)
class _Sizes:
    """A table's columns as ``_width`` measures the measuring form (``_build``'s, at
    ``name_width``): per column its widest header line (on one line and as given) and
    cell line, and its cap. Any form of the table (columns left out, headers on two
    lines) is then measured by a sum, without building it."""

    cols: Sequence[Col]
    rows: Sequence[Sequence[str]]
    name_width: int
    wide: bool
    one: tuple[int, ...]
    two: tuple[int, ...]
    body: tuple[int, ...]
    cap: tuple[int | None, ...]
    markup: bool  # a header rich would read as markup: rich measures the built table

    @classmethod
    def of(cls, cols: Sequence[Col], rows: Sequence[Sequence[str]], name_width: int,
           wide: bool) -> _Sizes:
        body = []
        for k, c in enumerate(cols):
            values = [row[k] for row in rows]
            if c.named:
                values = list(_names(c, tuple(values), name_width, wide))
            elif c.wrap:  # folded: cut as _build cuts it to measure
                values = [v[:WRAP_MIN] for v in values]
            body.append(max((_lines_width(strip_control_codes(v)) for v in values),
                            default=0))
        return cls(cols, rows, name_width, wide,
                   tuple(_lines_width(c.one_line) for c in cols),
                   tuple(_lines_width(c.header) for c in cols), tuple(body),
                   tuple(name_width if c.named else None for c in cols),
                   any("[" in c.header or "[" in c.one_line for c in cols))


def _lines_width(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _form_width(sizes: _Sizes, kept: list[int], two_lines: bool) -> int:
    """``_width`` of the measuring form of ``sizes``' table with the columns ``kept``."""
    if sizes.markup:
        cols = sizes.cols
        return _width(_build("", [cols[i] for i in kept],
                             [[(cols[i], row[i]) for i in kept] for row in sizes.rows],
                             two_lines, sizes.name_width, sizes.wide, measuring=True))
    pad = 2  # _build's tables: rich's padding (0, 1), one column left and right
    total = 2 + len(kept) - 1  # box.SIMPLE_HEAD: its edges and a separator per column
    for i in kept:
        w = max(sizes.two[i] if two_lines else sizes.one[i], sizes.body[i]) + pad
        cap = sizes.cap[i]
        total += w if cap is None else min(w, cap + pad)
    return total


def _name_room(sizes: _Sizes, kept: list[int], two_lines: bool, over: int) -> int:
    """The widest name width (at most ``sizes.name_width``) at which the form of ``kept``
    columns, ``over`` columns too wide at that width, fits: every name column narrows to
    it, each giving up only what it is wider than that."""
    named = [max(sizes.two[i] if two_lines else sizes.one[i], sizes.body[i])
             for i in kept if sizes.cols[i].named]
    w = sizes.name_width
    while w > 0:
        saved = sum(min(n, sizes.name_width) - min(n, w) for n in named)
        if saved >= over:
            return w
        w -= 1
    return 0


def _shown(cols: Sequence[Col], rows: Sequence[Sequence[str]]) -> list[list[str]]:
    """The cells as they are shown: control characters as visible escapes, before any
    name is measured or cut (a cut then never leaves half an escape sequence). A line
    break in a trace's name is shown as ``\\x0a`` (it cannot start a row of its own); in a
    ``lines`` column, whose lines the renderer escaped one by one, it stays a break."""
    shown = [console_text if c.lines else visible for c in cols]
    return [[f(v) for f, v in zip(shown, row, strict=True)] for row in rows]


def _left(cols: Sequence[Col], kept: list[int]) -> list[str]:
    return [c.one_line for i, c in enumerate(cols) if i not in kept]


def left_note(width: int, left: dict[str, list[str]] | list[str],
              where: str = "a wider terminal, --width, or --json") -> Text | None:
    """The dim line naming what a narrow terminal left out (per table where several)."""
    if isinstance(left, list):
        what = ", ".join(left)
    else:
        what = "; ".join(f"{t}: {', '.join(c)}" for t, c in left.items() if c)
    if not what:
        return None
    return Text(f"left out at {width} columns: {what} ({where} has every figure)",
                style="dim")


def fitted_groups(title: str, key: Col, cols: Sequence[Col], rows: Sequence[Sequence[str]],
                  width: int) -> list[Table]:
    """A table of one ``key`` column and many peer columns (one per run) as few tables as
    fit ``width``, each with the key column and the next peers, in order: no peer leaves.
    (A peer that does not fit even alone gets a table of its own.)"""
    rows = _shown([key, *cols], rows)

    def part(lo: int, hi: int, measuring: bool) -> Table:
        shown = [key, *cols[lo:hi]]
        cells = [list(zip(shown, [r[0], *r[1 + lo:1 + hi]], strict=True)) for r in rows]
        return _build(title if lo == 0 else f"{title} (continued)", shown, cells,
                      True, NAME_MAX, measuring=measuring)

    tables: list[Table] = []
    lo = 0
    while lo < len(cols) or not tables:
        hi = len(cols)
        while hi > lo + 1 and _width(part(lo, hi, measuring=True)) > width:
            hi -= 1
        tables.append(part(lo, hi, measuring=False))
        lo = hi
    return tables
