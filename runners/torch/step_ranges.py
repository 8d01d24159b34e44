"""The ranges a PyTorch step is recorded in: ``record_function`` with the same NVTX range
(Nsight Systems sees them too), the NVTX ``step N`` around each profiled step, and under
nsys an NVTX range per ATen op with its input shapes. Imported only inside a runner
process (the variants' loop in ``torch_runner.py``, a user's script in ``torch_session.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


def op_ranges(device, push_pop) -> contextlib.AbstractContextManager:
    """NVTX ranges named after each ATen op with its input shapes, for Nsight Systems
    captures (the efficiency figures' FLOPs).

    On CUDA this is torch's own ``emit_nvtx(record_shapes=True)`` (what nsys'
    ``--pytorch=autograd-shapes-nvtx`` turns on); a CPU build of torch has no NVTX, so a
    dispatch mode pushes one range per op in the same form (``aten::mm, sizes = [[2, 3],
    [3, 4]]``), so the op, cast and efficiency columns work on a CPU nsys capture too.
    """
    import torch

    if device.type == "cuda":
        return torch.autograd.profiler.emit_nvtx(record_shapes=True)
    from torch.utils._python_dispatch import TorchDispatchMode

    push, pop = push_pop

    def sizes(args: tuple) -> str:
        # emit_nvtx's form: a tensor's shape, [] for any other argument
        return str([list(a.shape) if isinstance(a, torch.Tensor) else [] for a in args])

    class OpRanges(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            if name.startswith("profiler::"):  # record_function's own bookkeeping ops
                return func(*args, **(kwargs or {}))
            push(f"{name}, sizes = {sizes(args)}")
            try:
                return func(*args, **(kwargs or {}))
            finally:
                pop()

    return OpRanges()


def recorded(nvtx: tuple[Callable, Callable] | None
             ) -> Callable[[str], contextlib.AbstractContextManager]:
    """record_function and the same NVTX range (Nsight Systems sees them too)."""
    import torch

    @contextlib.contextmanager
    def ranged(name: str) -> Iterator[None]:
        if nvtx:
            nvtx[0](name)
        try:
            with torch.profiler.record_function(name):
                yield
        finally:
            if nvtx:
                nvtx[1]()
    return ranged


def active_step(nvtx: tuple[Callable, Callable] | None, device: Any, profiler: str
                ) -> Callable[[int], contextlib.AbstractContextManager]:
    """NVTX "step N" around each active step (torch.profiler marks ProfilerStep#N
    itself); under nsys, op ranges inside it, as torch.profiler records ops."""
    @contextlib.contextmanager
    def around(i: int) -> Iterator[None]:
        if nvtx is not None:
            nvtx[0](f"step {i}")
        try:
            with op_ranges(device, nvtx) if profiler == "nsys" else contextlib.nullcontext():
                yield
        finally:
            if nvtx is not None:
                nvtx[1]()
    return around
