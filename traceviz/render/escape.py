"""Text a trace controls (kernel, device, file and run names, configs), made safe for
where it goes: one function per destination, so every path to it escapes the same way.

- ``visible``: the terminal and one-line errors. Control characters (an escape sequence
  that sets the window title or clears the screen, a bell, a carriage return that hides
  what precedes it) and the invisible ones that reorder text (bidirectional overrides)
  are shown as ``\\x1b``, ``\\u202e``: seen, never acted on. Shown before a name is cut
  to a column's width, so a cut never leaves half a sequence.
- ``markdown``: a Markdown report. HTML is escaped (a renderer such as Python-Markdown
  passes raw HTML through: ``<img onerror=...>`` would run) and so are Markdown's own
  marks (links, emphasis, table pipes), so a name reads as the text it is.
- ``html_text``: a notebook's HTML display. ``<``, ``>``, ``&`` and quotes are escaped
  (a kernel named ``<script>`` shows as text, never runs) after ``visible``.
- ``file_name``: a file made from a label. Characters unsafe in a file name become
  ``_``; where that changed the label, a short digest of it follows, so labels that
  differ ("a b", "a_b") never share a file.
"""

from __future__ import annotations

import hashlib

_FORMAT = [*range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0xFEFF]
_CONTROL = [*range(0x20), 0x7F, *range(0x80, 0xA0)]
_VISIBLE = {c: f"\\x{c:02x}" for c in _CONTROL} | {c: f"\\u{c:04x}" for c in _FORMAT}
# within rich's rendering a line break or a tab is layout, not a trace's text
_CONSOLE = {c: v for c, v in _VISIBLE.items() if chr(c) not in "\n\t"}
# the marks Python-Markdown (with its tables) and GitHub both take back from "\\"
_MARKDOWN_MARKS = str.maketrans({c: "\\" + c for c in "\\`*_[]|#!"})


def visible(text: str) -> str:
    """``text`` with every control and invisible format character written as an escape."""
    return text.translate(_VISIBLE)


def console_text(text: str) -> str:
    """``visible``, but line breaks and tabs kept: rich's own layout of rendered text."""
    return text.translate(_CONSOLE)


def markdown(text: object) -> str:
    """``text`` for a Markdown document or table cell: shown as itself, never as HTML,
    a link, emphasis or a cell break."""
    import html  # here: the terminal's renders never need it

    return html.escape(visible(str(text)).translate(_MARKDOWN_MARKS), quote=True)


def html_text(text: object) -> str:
    """``text`` for an HTML element or attribute: shown as itself, never as markup."""
    import html

    return html.escape(visible(str(text)), quote=True)


def file_name(label: str, most: int = 80) -> str:
    """A file name stem for ``label``: letters, digits, ``-`` and ``_`` kept, anything else
    ``_``, and a digest of the label where that changed it (distinct labels, distinct files)."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in label)
    if safe == label and 0 < len(label) <= most:
        return label
    digest = hashlib.sha1(label.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe[:most]}-{digest}"
