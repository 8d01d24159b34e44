"""A forward pass captured once in a CUDA graph and replayed (graph_torch, and any PyTorch
variant under ``traceviz capture --graph-replay``). Imported only inside a runner process
(or a test).

The capture follows PyTorch's recipe for ``torch.cuda.graph``: static input buffers, a
few warm-up calls on a side stream (allocations, lazy initialisation and any stream or
handle a module creates on its first call happen off the graph), one call captured, then
each call copies its inputs into the buffers and replays the graph. The outputs are the
graph's own buffers, overwritten by the next replay: read or clone them before it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from traceviz.runners.capture_protocol import Phases, RunnerError

WARMUP_CALLS = 3  # eager calls on a side stream before the capture


class GraphCaptureError(RuntimeError):
    """The callable could not be captured in a CUDA graph (the message says why)."""


class ForwardGraph:
    """``fn(*tensors)`` captured in a CUDA graph on its first call (again when the inputs'
    shapes or dtypes change) and replayed on every call. With ``timed``, each replay is
    timed with CUDA events around it (``times_s``)."""

    def __init__(self, fn: Callable[..., Any], timed: bool = False):
        self.fn = fn
        self.timed = timed
        self.graph: Any = None
        self.static_in: tuple[Tensor, ...] = ()
        self.static_out: Any = None
        self.events: list[tuple[Any, Any]] = []  # (start, end) around each replay

    def _matches(self, args: tuple[Tensor, ...]) -> bool:
        return self.graph is not None and len(args) == len(self.static_in) and all(
            a.shape == s.shape and a.dtype == s.dtype and a.device == s.device
            for a, s in zip(args, self.static_in, strict=True))

    def capture(self, *args: Tensor) -> None:
        static = tuple(a.detach().clone() for a in args)
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(WARMUP_CALLS):  # warm up allocations and lazy init off the graph
                    self.fn(*static)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = self.fn(*static)
        except Exception as e:  # what torch raises varies: one line says why
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise GraphCaptureError(f"{type(e).__name__}: {first}"[:400]) from e
        self.graph, self.static_in, self.static_out = graph, static, static_out

    def __call__(self, *args: Tensor) -> Any:
        if not self._matches(args):
            self.capture(*args)
        for static, a in zip(self.static_in, args, strict=True):
            static.copy_(a)
        if not self.timed:
            self.graph.replay()
            return self.static_out
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        self.graph.replay()
        end.record()
        self.events.append((start, end))
        return self.static_out

    def times_s(self) -> list[float]:
        """Seconds of each timed replay so far, in call order (waits for the last)."""
        if self.events:
            self.events[-1][1].synchronize()
        return [start.elapsed_time(end) / 1e3 for start, end in self.events]


def replay_phases(phases: Phases, replay_s: list[float]) -> tuple[Phases, dict]:
    """The run's phases timed by CUDA events (one replay per step: the warm-up steps, the
    timed ones, then the profiled phase's two unmarked and its marked steps), and
    bench.json's figures of that timing, with the wall-clock times beside them."""
    warm, timed, marked = len(phases.warmup_times), len(phases.times), len(phases.prof_times)
    steps = warm + timed + marked + 2  # the profiled phase: 2 unmarked steps, then the marked
    if len(replay_s) != steps:
        raise GraphCaptureError(f"{len(replay_s)} replays timed for {steps} steps")
    from traceviz.runners.benchdefs import first_call_seconds, profiler_overhead, spread

    wall = spread(phases.times)
    by_events = phases._replace(times=replay_s[warm:warm + timed],
                                prof_times=replay_s[len(replay_s) - marked:])
    extra = {
        "graph_replay": True,
        "timing": "cuda_events",
        "timing_note": "each batch is one CUDA graph replay timed by CUDA events around it; "
                       "the wall-clock times of the same batches are wall_*",
        "wall_time_per_batch_s": wall,
        "wall_batch_times_s": phases.times,
        # the steady profiled step, as the overhead's (the start-up step left out)
        "wall_profiled_time_per_batch_s": profiler_overhead(
            phases.prof_times, phases.times).get("profiled_time_per_batch_s"),
        # the warm-up's wall time (the eager warm-up calls and the capture) above a
        # wall-clock batch
        "first_call_s": first_call_seconds(phases.warmup_times, wall["median"]),
    }
    return by_events, extra


def graphed_forward(loss_of: Callable, variant: str) -> tuple[Callable, Any]:
    """The whole forward step (embedding, LSTM, head, loss) in one CUDA graph: the forward
    that replays it, and the graph."""
    graphed = ForwardGraph(loss_of, timed=True)

    def forward(inp, target):
        try:
            return graphed(inp, target)
        except GraphCaptureError as e:
            raise RunnerError(f"{variant} cannot be captured in a CUDA graph: {e}") from None
    return forward, graphed
