"""NVTX push/pop for the runners, in a form every Nsight Systems release records.

The ``nvtx`` package (0.2.9 and later) asks ``nvtxDomainIsEnabled`` before each range and
turns a domain into a no-op ``DummyDomain`` when the answer is 0. That entry point is
newer than the injection library of Nsight Systems 2022.4, so NVTX's fallback answers 0:
nsys then records the domain being created and destroyed and no range at all. The
package's own Cython bindings (``nvtx._lib.lib``) push ranges without asking, with
registered strings in the default domain; nsys 2022.4 records those (eventType 59), as
does any newer nsys.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

Ranges = tuple[Callable[[str], None], Callable[[], None]]


def _package_bindings() -> Ranges:
    from nvtx._lib import lib  # the package's compiled NVTX v3 calls

    domain = lib.DomainHandle()  # NULL handle: the default domain, as torch.cuda.nvtx uses

    @lru_cache(maxsize=4096)
    def attributes(message: str) -> object:
        return lib.EventAttributes(domain, message=lib.RegisteredString(domain, message),
                                   color=0xFF76B900)

    def push(message: str) -> None:
        lib.push_range(attributes(message), domain)

    def pop() -> None:
        lib.pop_range(domain)

    return push, pop


def provider(cuda: bool) -> Ranges | None:
    """(push, pop) for NVTX ranges, or None when nothing can emit them."""
    try:
        return _package_bindings()
    except (ImportError, AttributeError, TypeError):
        pass  # another layout of the nvtx package, or none installed
    try:
        import nvtx

        return nvtx.push_range, nvtx.pop_range
    except ImportError:
        pass
    if cuda:
        import torch

        return torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    return None
