"""MkDocs hook: the Contributing page is the repository's CONTRIBUTING.md, whose links are
written from the repository root (``docs/DESIGN.md``); on the site that page is
``DESIGN.md``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001
    if page.file.src_uri != "contributing.md":
        return markdown
    text = (ROOT / "CONTRIBUTING.md").read_text()
    return re.sub(r"\]\(docs/", "](", text)
