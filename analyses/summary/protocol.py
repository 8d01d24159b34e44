"""What a section of ``traceviz analyze`` is: how its figures are computed from the
summary's inputs, and its part of ``--json``.

A ``Summary`` (``figures.py``) holds the totals; every other figure belongs to a section.
``registry.py`` lists the sections, one row each: the row's name is the section's key, its
place is the section's place in ``--json``, and the row says where the terminal prints it.
A section with ``compute`` is lazy: ``summary.<key>`` computes it when first read and
keeps it (the ``Section`` is the attribute, typed by what ``compute`` returns), so a
command that shows a few sections does not pay for the others; ``Summary.to_dict`` reads
every one. The terminal's side (how a section prints) is a function registered by the
``Section`` object beside it in ``traceviz/render/terminal/``: an analysis never imports a
renderer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

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
    # sections a command computes in another process (``traceviz/cli/apart.py``): an
    # object whose ``take(key)`` gives (True, the figures) or (False, None): compute here
    apart: Any = None


# its part of --json: (the summary, the kernels to list) -> {key: value, ...} in order;
# {} where the section has nothing to say (efficiency without with_efficiency)
ToJson = Callable[["Summary", int], dict[str, Any]]
T = TypeVar("T")


class Section(Generic[T]):
    """One part of ``analyze``'s summary, named by its row in ``registry.py``.

    ``json`` gives its part of ``--json``; ``keys`` lists the top-level keys that part can
    hold, in order (default: the section's key alone; ``launches`` gives three).
    ``compute`` (the inputs, the summary's totals) -> its figures, of type ``T``; None for
    a part of the totals the ``Summary`` holds as its own fields (computed at once by
    ``summarize``). Its row sets ``key`` (the row's name: ``summary.<key>`` reads the
    figures) and ``printed`` (its place on the terminal, a lower number first; None:
    ``--json`` only).
    """

    key: str
    printed: int | None = None
    apart: bool = False

    def __init__(self, json: ToJson, compute: Callable[[Inputs, Summary], T] | None = None,
                 keys: tuple[str, ...] = ()) -> None:
        self.json = json
        self.compute = compute
        self.keys = keys

    def row(self, printed: int | None = None, apart: bool = False) -> Section[T]:
        """Its row in the registry: where the terminal prints it (``printed``), and whether
        a command may compute it in a forked process beside the others (``apart``, see
        ``traceviz/cli/apart.py``: its figures read the inputs and the totals alone, and
        pickle)."""
        self.printed = printed
        self.apart = apart
        return self

    def __set_name__(self, owner: type, name: str) -> None:
        """The row's name is the key (a section has one row)."""
        if getattr(self, "key", name) != name:
            raise ValueError(f"section {self.key!r} registered again as {name!r}")
        self.key = name

    @property
    def json_keys(self) -> tuple[str, ...]:
        return self.keys or (self.key,)

    @overload
    def __get__(self, summary: None, owner: type) -> Section[T]: ...

    @overload
    def __get__(self, summary: Summary, owner: type) -> T: ...

    def __get__(self, summary: Summary | None, owner: type) -> Section[T] | T:
        """``summary.<key>``: its figures, computed when first read, then kept in the
        instance's ``__dict__`` (where Python finds them before it asks here again). A part
        of the totals is no attribute here: the ``Summary`` field of that name is."""
        if self.compute is None:
            # not even on the class: a dataclass takes what getattr(Summary, "timings")
            # answers as that field's default
            raise AttributeError(f"section {self.key!r} is part of the totals")
        if summary is None:
            return self
        if summary.inputs is None:
            raise ValueError("a Summary made without its trace has no lazy sections")
        if summary.inputs.apart is not None:  # computed in another process, or not there
            got, figures = summary.inputs.apart.take(self.key)
            if got:
                summary.__dict__[self.key] = figures
                return cast(T, figures)
        value = self.compute(summary.inputs, summary)
        summary.__dict__[self.key] = value
        return value

    def __repr__(self) -> str:
        return f"<Section {getattr(self, 'key', '?')}>"
