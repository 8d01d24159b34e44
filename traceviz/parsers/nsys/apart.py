"""Whether an nsys SQLite export of NVTX ranges alone is read apart from the events table
(``ranges_apart``): a flag of its own, light, so that a command sets it before it knows
the format without importing the nsys reader."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_APART: ContextVar[bool] = ContextVar("nvtx_ranges_apart", default=False)


@contextmanager
def ranges_apart(on: bool = True) -> Iterator[None]:
    """Within it, an nsys SQLite export of NVTX ranges alone is read as ``ranges_of``
    reads it: the ranges in ``Trace.nvtx_ranges``, not in the events table."""
    token = _APART.set(on)
    try:
        yield
    finally:
        _APART.reset(token)


def wanted() -> bool:
    return _APART.get()
