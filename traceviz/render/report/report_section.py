"""A report's section (a title, a text, a table, charts) and how it is written: Markdown
(``to_markdown``: the charts as PNG files beside the .md) or HTML (``section_html``: the
charts embedded). Every text is escaped: titles, texts and cells hold names from traces.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from urllib.parse import quote

import pandas as pd

from traceviz.render.escape import markdown

NONE = "–"  # a cell without a figure; a column (a table) of nothing else is left out


@dataclass
class Section:
    title: str
    text: str = ""
    table: pd.DataFrame | None = None
    images: list[tuple[str, bytes]] = field(default_factory=list)  # (file name, PNG)


def figure_png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def shown_table(df: pd.DataFrame | None) -> pd.DataFrame | None:
    """``df`` as a report shows it: columns (after the first, the key) holding nothing but
    "–" left out, and no table at all where no figure is left (None)."""
    if df is None or df.empty:
        return None
    keep = [c for i, c in enumerate(df.columns)
            if i == 0 or not df[c].map(lambda v: isinstance(v, str) and v == NONE).all()]
    return df[keep] if len(keep) > 1 else None


def md_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of ``df``'s columns (not its index)."""
    cols = [markdown(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(markdown(v) for v in row) + " |")
    return "\n".join(lines)


def to_markdown(sections: list[Section], title: str, image_dir: str) -> tuple[str, dict]:
    """The Markdown text and ``{relative path: PNG bytes}`` to write beside it. Every
    text is escaped (``escape.markdown``): titles, texts and cells hold names from traces."""
    out, files = [f"# {markdown(title)}", ""], {}
    for s in sections:
        out += [f"## {markdown(s.title)}", ""]
        if s.text:
            out += [markdown(s.text), ""]
        if (table := shown_table(s.table)) is not None:
            out += [md_table(table), ""]
        for name, png in s.images:
            rel = f"{image_dir}/{name}"
            files[rel] = png
            out += [f"![{markdown(name)}]({quote(rel)})", ""]
    return "\n".join(out), files


def section_html(s: Section) -> str:
    """A section as HTML: its tables inline, its charts as embedded PNG (the explorable
    report, ``html_page.py``, shows the sections the Markdown report holds this way)."""
    body = [f"<h2>{html.escape(s.title)}</h2>"]
    if s.text:
        body.append(f"<p>{html.escape(s.text)}</p>")
    if (table := shown_table(s.table)) is not None:
        body.append(table.to_html(index=False, escape=True, border=0))
    for name, png in s.images:
        data = base64.b64encode(png).decode()
        # at most its own size (a PNG's pixels at 110 dpi), never stretched to the page
        body.append(f'<img alt="{html.escape(name)}" style="max-width:min(100%, '
                    f'{png_width(png)}px)" src="data:image/png;base64,{data}">')
    return "".join(body)


def png_width(png: bytes) -> int:
    """A PNG's width in pixels (its IHDR chunk)."""
    return int.from_bytes(png[16:20], "big") if png[:8] == b"\x89PNG\r\n\x1a\n" else 800
