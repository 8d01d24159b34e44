"""The terminal side of ``analyze``'s sections: every section's render, in the order the
terminal prints them (each section's ``printed`` in ``analyses/summary/registry.py``: the
header first, the notes last; not the order of ``--json``).

A section's render lives beside its kind of output (``host_view.py``, ``efficiency.py``, ...),
registered there by ``@section_render(SECTION)`` (``page.py``); the modules are imported
here so that every render is registered. A section without a render prints nothing on the
terminal (``--json`` still has it).
"""

from __future__ import annotations

from traceviz.analyses.summary.protocol import Section
from traceviz.analyses.summary.registry import sections
from traceviz.render.terminal import (  # noqa: F401  (importing them registers their renders)
    casts_view,
    efficiency,
    host_view,
    launches,
    phases_view,
    ranges_view,
    totals_view,
)
from traceviz.render.terminal.page import RENDERS, Render


def renders() -> list[tuple[Section, Render]]:
    """Every registered section's render, in print order."""
    printed = [s for s in sections() if s in RENDERS]
    if unplaced := [s.key for s in printed if s.printed is None]:
        raise ValueError(f"section {', '.join(unplaced)}: a render but no place to print "
                         "(its row's printed=)")
    return [(s, RENDERS[s]) for s in sorted(printed, key=lambda s: s.printed or 0)]


def unregister_render(section: Section) -> None:
    """Take the render of ``section`` out (a test's section, once the test is done)."""
    del RENDERS[section]
