"""Step marks from a user's own code: ``traceviz.step()`` and the optimizer's ``step()``.

A profiling session (``traceviz capture -- python train.py``, ``traceviz.profile()``)
registers itself here as the one receiver; without one, ``traceviz.step()`` does nothing,
so a script that calls it still runs unprofiled. Imports nothing but the standard library:
``import traceviz`` in a user's script must stay cheap.

Two sources, one rule: a ``traceviz.step()`` call is the user saying where steps end, so
once one arrives the optimizer's steps no longer count. Of several optimizers (a GAN's two,
SparseAdam beside Adam) only the first one seen to step marks steps: one training step,
one mark.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Receiver = Callable[[str], None]  # called with the source: "traceviz.step" or "optimizer"

_receiver: Receiver | None = None
_explicit = False          # a traceviz.step() call was seen: optimizer steps stop counting
_first_optimizer: int | None = None


def attach(receiver: Receiver) -> None:
    """Make ``receiver`` the one session that step marks reach."""
    global _receiver, _explicit, _first_optimizer
    _receiver, _explicit, _first_optimizer = receiver, False, None


def detach() -> None:
    global _receiver
    _receiver = None


def step() -> None:
    """The user's mark: a training step (or any unit of work) ends here."""
    global _explicit
    if _receiver is None:
        return
    _explicit = True
    _receiver("traceviz.step")


def optimizer_stepped(optimizer: Any, *_: Any) -> None:
    """torch's global optimizer step post-hook (``register_optimizer_step_post_hook``)."""
    global _first_optimizer
    if _receiver is None or _explicit:
        return
    if _first_optimizer is None:
        _first_optimizer = id(optimizer)
    if id(optimizer) == _first_optimizer:
        _receiver("optimizer")


class StepClock:
    """Wall time of each step, from the marks: step 0 runs from ``start`` to the first
    mark, step k from mark k to mark k+1 (the last, unfinished one is not a step).
    ``resume`` moves the start of the step just begun past the session's own work at
    the mark (starting or stopping a profiler, writing a trace), which is no step's."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.marks: list[float] = []
        self.starts: list[float] = [self.start]
        self.source: str | None = None

    def mark(self, source: str) -> int:
        """Record a mark; returns the number of the step that begins at it."""
        if source == "traceviz.step" and self.source not in (None, source):
            # the user's marks replace the optimizer steps counted before the first one
            self.marks, self.starts = [], [self.start]
        if self.source is None or source == "traceviz.step":
            self.source = source
        now = time.perf_counter()
        self.marks.append(now)
        self.starts.append(now)
        return len(self.marks)

    def resume(self) -> None:
        self.starts[-1] = time.perf_counter()

    def times(self) -> list[float]:
        # the last start (the unfinished step) has no end
        return [end - start for start, end in zip(self.starts[:-1], self.marks, strict=True)]

    def phases(self, warmup: int, active: int) -> dict[str, list[float]]:
        """Step times by phase: ``warmup`` (the unprofiled steps and the profiler's
        warm-up step), ``profiled`` (the active steps) and ``timed`` (the unprofiled
        steps after them)."""
        t = self.times()
        return {"warmup": t[:warmup + 1], "profiled": t[warmup + 1:warmup + 1 + active],
                "timed": t[warmup + 1 + active:]}
