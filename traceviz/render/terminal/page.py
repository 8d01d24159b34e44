"""What ``analyze`` prints, assembled section by section: each section's render, registered
by ``@section_render(SECTION)`` beside it, adds its renderables to one ``Page``
(``sections.py`` runs them in the registry's print order), and the tables it fitted name
the columns a narrow terminal left out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import RenderableType
from rich.table import Table

from traceviz.analyses.summary.figures import Summary
from traceviz.analyses.summary.protocol import Section
from traceviz.render.terminal.fit import pinned


@dataclass
class Page:
    """The options every render reads (``top`` kernels or rows, ``wide`` names, the
    terminal's ``width``) and what the renders have added so far."""

    top: int = 15
    wide: bool = False
    width: int = 120
    parts: list[RenderableType] = field(default_factory=list)
    # per table, the columns the width left out (the notes' render names them last)
    left: dict[str, list[str]] = field(default_factory=dict)

    def add(self, *parts: RenderableType) -> None:
        self.parts.extend(parts)

    def add_fitted(self, label: str, fitted: tuple[RenderableType, list[str]]) -> None:
        """A fitted table (``fit.fitted_table``'s table and left-out columns) under the
        label the left-out line names it by, its columns' widths fixed for the page's
        width (the page is printed that wide)."""
        part, self.left[label] = fitted
        self.parts.append(pinned(part, self.width) if isinstance(part, Table) else part)


# a section's terminal render: reads the summary (a lazy section only where it shows
# it), adds to the page; prints nothing where the section has nothing to show
Render = Callable[[Summary, Page], None]

# every section's terminal render, by its Section (one render per section)
RENDERS: dict[Section, Render] = {}


def section_render(section: Section) -> Callable[[Render], Render]:
    """Register the decorated function as ``section``'s terminal render; it prints at the
    place the section's row gives (``printed`` in ``analyses/summary/registry.py``)."""
    def register(render: Render) -> Render:
        if section in RENDERS:
            raise ValueError(f"{section!r} has a render already")
        RENDERS[section] = render
        return render
    return register
