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

import itertools

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
