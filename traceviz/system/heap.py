"""The process's own memory."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def release_free_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``). Decoding and
    deriving leave ~100 MB per 170 MB of JSON free but held by the C heap, which Arrow's
    own allocator (writing the Parquet) cannot reuse: without this the import's peak is
    the two stacked (Dask's workers trim for the same reason). A no-op off glibc."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], Any] | None:
    """glibc's ``malloc_trim`` (None: not there), looked up once, among the symbols the
    process has loaded (libc's among them): ``ctypes.util.find_library("c")`` runs
    ``ldconfig -p`` in a subprocess on every call, ~10 ms twice per trace read."""
    import ctypes

    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):  # no dlopen of the process itself (Windows)
        return None
