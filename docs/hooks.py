"""MkDocs hook: the Contributing page is the repository's CONTRIBUTING.md, whose links are
written from the repository root (``docs/DESIGN.md``); on the site that page is
``DESIGN.md``. On every page, a ``<!-- generated: NAME -->`` marker becomes the table of
that registry (``tables.py``)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tables():
    """``docs/tables.py``, loaded by its path under a name no installed package has."""
    spec = importlib.util.spec_from_file_location("traceviz_docs_tables",
                                                  ROOT / "docs" / "tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TABLES = _tables()


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001
    if page.file.src_uri == "contributing.md":
        text = (ROOT / "CONTRIBUTING.md").read_text()
        return TABLES.expand(re.sub(r"\]\(docs/", "](", text))
    return TABLES.expand(markdown)
