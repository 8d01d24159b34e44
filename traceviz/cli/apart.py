"""The sections whose registry row says ``apart`` computed in a forked process while the
command computes and prints the others (``system/forked.py``): on a small trace, where
``analyze`` is mostly imports and GIL-bound pandas work on one core, the sections printed
after the header that read no other section (ranges and efficiency the costliest) run on
a second while the command works out the header and prints each section as it comes.

The child computes them in the registry's order and sends each as soon as it has it. A
section is taken from the child when first read, as if computed then; one that the child
could not give (it failed, or was killed, before it) is computed in the command's own
process, so the figures never depend on where they were computed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from traceviz.analyses.summary.registry import sections
from traceviz.system import forked

if TYPE_CHECKING:
    from traceviz.analyses.summary.figures import Summary

# the events a trace holds at most to be forked for: the child's own working memory adds
# to the parent's while both compute (a small trace's analyze is where the time matters)
MAX_ROWS = 1_000_000


class Apart:
    """The sections ``keys`` being computed by ``child``, which sends each (key, figures)
    as soon as it has them; each taken once."""

    def __init__(self, keys: tuple[str, ...], child: forked.Forked):
        self.keys = set(keys)
        self.child = child
        self._values: dict[str, Any] = {}

    def take(self, key: str) -> tuple[bool, Any]:
        """(True, the section's figures) where the child computed them; (False, None) where
        this process must (not a section sent apart, or the child failed before it)."""
        if key not in self.keys:
            return False, None
        self.keys.discard(key)
        while key not in self._values:
            ok, sent = self.child.next()
            if not ok:
                return False, None
            self._values[sent[0]] = sent[1]
        return True, self._values.pop(key)

    def stop(self) -> None:
        """The sections not taken yet are not wanted: the child is killed."""
        self.keys.clear()
        self._values.clear()
        self.child.stop()


def compute_apart(summary: Summary) -> Apart | None:
    """Start computing ``summary``'s ``apart`` sections not read yet in a forked child
    (where ``forked.may_fork`` and the trace is small enough), in the registry's order;
    None where none was."""
    inputs = summary.inputs
    if inputs is None or inputs.apart is not None or len(inputs.trace.events) > MAX_ROWS:
        return None
    keys = tuple(s.key for s in sections()
                 if s.apart and s.compute is not None and s.key not in summary.__dict__)
    if not keys:
        return None

    def figures() -> Iterator[tuple[str, Any]]:
        for key in keys:
            yield key, getattr(summary, key)

    child = forked.start(figures)
    if child is None:
        return None
    inputs.apart = Apart(keys, child)
    return inputs.apart
