"""What a section of ``traceviz analyze`` is: a name, how its figures are computed from
the summary's inputs, and its part of ``--json``.

A ``Summary`` (``figures.py``) holds the totals; every other figure belongs to a section,
registered in ``registry.py`` in the order of ``--json``. A section with ``compute`` is
lazy: ``summary.<key>`` computes it when first read and keeps it, so a command that shows
a few sections does not pay for the others; ``Summary.to_dict`` reads every one. The
terminal's side (how a section prints) registers by the same key in
``traceviz/render/terminal/sections.py``: an analysis never imports a renderer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:  # types only: figures.py imports the registry, which imports this
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace


@dataclass
class Inputs:
    """What a summary's lazy sections are computed from: the trace, its work rows (kernels,
    or the leaf ops that play them), the analysis windows per device and their wall-clock
    union (``ws``, ``we``), whether analyze's efficiency and memory sections are asked
    (ranks skip them) and the ``peaks.Peak`` overriding the device's row."""

    trace: Trace
    work: pd.DataFrame
    windows: dict
    ws: Any
    we: Any
    with_efficiency: bool
    peak: Any


# its part of --json: (the summary, the kernels to list) -> {key: value, ...} in order;
# {} where the section has nothing to say (efficiency without with_efficiency)
ToJson = Callable[["Summary", int], dict[str, Any]]
# its figures: (the inputs, the summary's totals) -> anything its json and render read
Compute = Callable[[Inputs, "Summary"], Any]


@dataclass(frozen=True)
class Section:
    """One registered part of ``analyze``'s summary.

    ``key`` names it: the ``Summary`` attribute its figures are read as (where it has
    ``compute``), its terminal render's key. ``json`` gives its part of ``--json``;
    ``keys`` lists the top-level keys that part can hold, in order (default: ``key``
    alone; ``launches`` gives three). ``compute`` is None for a part of the totals the
    ``Summary`` holds as its own fields (computed at once by ``summarize``)."""

    key: str
    json: ToJson
    compute: Compute | None = None
    keys: tuple[str, ...] = ()

    @property
    def json_keys(self) -> tuple[str, ...]:
        return self.keys or (self.key,)
