"""Regex pieces that find what ``A\\w*B`` and ``A.*B`` find, in time linear in the text.

Python's ``re`` tries a pattern at every position, and from each ``A`` runs ``\\w*`` (or
``.*``) to the end of the word (line) before it backs off looking for ``B``: a name that
holds ``A`` many times in one word or line costs occurrences x length (a 1 MB kernel
name, minutes). The first ``A`` of a word (line) ends before any later one, so it reaches
every ``B`` a later one reaches: these pieces try only that one. A lookahead that
captures, followed by its capture, is an atomic group (``(?>...)`` needs Python 3.11):
the engine never backs into it to try a later ``A``.

Both keep what a search finds or not; a piece's own match may start earlier than the plain
pattern's (at the word or line start), so use them where only that matters (classifying
names), or where the capture, not the span, is read.
"""

from __future__ import annotations

import importlib
import itertools
import re
from typing import Any

_IDS = itertools.count()  # group names, unique in every pattern a piece goes into


def in_word(a: str, gap: str, b: str) -> str:
    """``{a}\\w{gap}{b}`` (``gap``: ``*``, ``+?``, ...), tried from the first ``a`` of each
    word. ``a`` must match word characters only (it then lies inside one word)."""
    g = f"_w{next(_IDS)}"
    return rf"(?<!\w)(?=(?P<{g}>\w*?(?:{a})))(?P={g})\w{gap}(?:{b})"


def in_line(a: str, b: str) -> str:
    """``{a}.*{b}`` (``.`` short of a newline), tried from the first ``a`` of each line.
    ``a`` must not match a newline, and where it matches at several places its earliest
    match must end first (a literal, or an ``in_word`` piece)."""
    g = f"_l{next(_IDS)}"
    return rf"(?<![^\n])(?=(?P<{g}>[^\n]*?(?:{a})))(?P={g})[^\n]*(?:{b})"


# The literal gate. Python's ``re`` has no literal prefilter: a pattern of many
# alternatives, case-insensitive or opening on an anchor, is tried branch by branch at
# every position of the text (a 150-character kernel name: 40-140 us per category
# pattern, most of reading a small trace's names). Every match of such a pattern holds
# one of a few literals (``flash``, ``fmha``, ...): text holding none cannot match, and
# a substring test tells in well under a microsecond. The literals are read from the
# pattern's own parse, so they follow any edit of it.
try:  # re's own parser: Python 3.11+; 3.10 names it sre_parse (which 3.11+ warns about)
    _sre: Any = importlib.import_module("re._constants")
    _sre_parse: Any = importlib.import_module("re._parser")
except ImportError:  # pragma: no cover - Python 3.10
    _sre = importlib.import_module("sre_constants")
    _sre_parse = importlib.import_module("sre_parse")

_REPEATS = tuple(getattr(_sre, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
                 if hasattr(_sre, n))
_ATOMIC = getattr(_sre, "ATOMIC_GROUP", None)


class Gated:
    """``rx`` behind its literal gate: ``search`` finds what ``rx.search`` finds, and on
    ASCII text that holds none of the literals every match of ``rx`` holds (compared in
    lower case: a necessary condition whatever the pattern's case flags) it answers None
    without running ``rx``. Text that is not ASCII always runs ``rx`` (case folding beyond
    ASCII, the Kelvin sign matching ``k``, is left to ``re``)."""

    __slots__ = ("literals", "rx")

    def __init__(self, rx: re.Pattern[str]):
        self.rx = rx
        self.literals = required_literals(rx)

    def search(self, text: str, lower: str | None = None) -> re.Match[str] | None:
        """``rx.search(text)``; ``lower``: ``text.lower()`` when the caller has it."""
        if self.literals is not None and text.isascii():
            low = text.lower() if lower is None else lower
            if not any(lit in low for lit in self.literals):
                return None
        return self.rx.search(text)


def required_literals(rx: re.Pattern[str]) -> tuple[str, ...] | None:
    """Lower-case ASCII strings one of which every match of ``rx`` holds (None: none
    found, every text may match)."""
    try:
        tree = _sre_parse.parse(rx.pattern, rx.flags)
    except Exception:  # noqa: BLE001 (a parser of another Python: no gate, same results)
        return None
    found = _needed(list(tree))
    return tuple(sorted(found)) if found else None


def _needed(items: list) -> frozenset[str] | None:
    """For a sequence of parsed items, the best set of literals one of which every match
    holds: a run of literal characters, or a part that must match (a group, an
    alternation whose every branch has a set, a repeat at least once, a positive
    lookaround)."""
    best: frozenset[str] | None = None

    def consider(found: frozenset[str] | None) -> None:
        nonlocal best
        if found and (best is None or _rank(found) > _rank(best)):
            best = found

    run: list[str] = []
    for op, av in items:
        if op is _sre.LITERAL and av < 128:
            run.append(chr(av))
            continue
        if run:
            consider(frozenset({"".join(run).lower()}))
            run = []
        if op is _sre.SUBPATTERN:
            consider(_needed(av[-1]))
        elif op is _sre.BRANCH:
            branches = [_needed(b) for b in av[1]]
            if all(branches):
                consider(frozenset().union(*branches))  # type: ignore[arg-type]
        elif op in _REPEATS and av[0] >= 1:
            consider(_needed(av[2]))
        elif op is _sre.ASSERT:  # (?=...) or (?<=...): its text is in the string
            consider(_needed(av[1]))
        elif _ATOMIC is not None and op is _ATOMIC:
            consider(_needed(av))
    if run:
        consider(frozenset({"".join(run).lower()}))
    return best


def _rank(found: frozenset[str]) -> tuple[int, int]:
    """The better set: its shortest literal longest (fewer texts pass), then fewest."""
    return min(map(len, found)), -len(found)
