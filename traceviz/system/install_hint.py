"""The command that installs one of traceviz's extras, worded for where traceviz runs.

From a source checkout installed editable, ``pip install -e '.[torch]'`` (run in the
checkout) is the command; anywhere else, ``pip install 'traceviz[torch]'`` (the other one
fails outside a checkout: "does not appear to be a Python project"). Standard library
only: the runners and the registry import it before any framework.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path


def editable_checkout() -> bool:
    """Whether this traceviz runs from a source checkout: an install of it that pip
    records as editable (``direct_url.json``: ``dir_info.editable``), or, whatever the
    metadata found first says (a checkout's own ``traceviz.egg-info`` shadows the
    install's when Python runs there), code that sits beside a ``pyproject.toml``."""
    for dist in metadata.distributions(name="traceviz"):
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "{}")
        except (OSError, ValueError):
            continue
        info = direct.get("dir_info") if isinstance(direct, dict) else None
        if isinstance(info, dict) and info.get("editable"):
            return True
    return (Path(__file__).resolve().parents[1] / "pyproject.toml").is_file()


def pip_install(extra: str) -> str:
    """``pip install ...`` for traceviz's ``extra`` (``torch``, ``tf``, ``jax``, ``dist``)."""
    if editable_checkout():
        return f"pip install -e '.[{extra}]'"
    return f"pip install 'traceviz[{extra}]'"
