"""The what-if scenarios: one row per scenario (``ScenarioSpec``) in ``SCENARIOS``, the
scenarios ``whatif`` replays by default, and the parser of ``--scenario`` texts.

A scenario is a graph transform (its own module: ``transforms.py``, ``cuda_graphs.py``,
``lstm_rungs.py``) plus its row here; ``engine.py`` replays it, the row says what it needs from
the trace and what ``whatif`` says where it cannot apply or finds nothing to change.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from traceviz.analyses.replay.graph import ReplayGraph
from traceviz.analyses.whatif.cuda_graphs import cuda_graphs
from traceviz.analyses.whatif.fuse_attention import fuse_attention
from traceviz.analyses.whatif.given import Given
from traceviz.analyses.whatif.lstm_rungs import batch_input_gemms, drop_stream_sync, merge_gemms
from traceviz.analyses.whatif.overlap_copies import overlap_copies
from traceviz.analyses.whatif.overlap_input import overlap_input
from traceviz.analyses.whatif.stalls import drop_host_stalls
from traceviz.analyses.whatif.transforms import (
    fuse_pointwise,
    gemm_speedup,
    host_speedup,
    no_casts,
)
from traceviz.errors import UsageError

# (graph, factor: 0 where the scenario takes none[, what the command resolved: a row
# with takes_given]) -> (changed graph, the assumptions it states; none: it found nothing
# to change)
Transform = Callable[..., tuple[ReplayGraph, list[str]]]


@dataclass(frozen=True)
class ScenarioSpec:
    """One what-if scenario: its transform and what ``whatif`` needs to know about it."""

    name: str
    transform: Transform
    nothing_to_change: str  # what the trace lacks when the transform changes nothing
    takes_factor: bool = False  # written name=factor (gemm_speedup=2)
    cpu_reason: str | None = None  # why it does not apply on a CPU trace (None: it does)
    rewrites_launches: bool = False  # it needs the trace's launch calls
    needs_steps: str | None = None  # why it needs the trace's step marks (None: it does not)
    help: str = ""  # what changes in the replay (the docs' table of scenarios, docs/whatif.md)
    takes_given: bool = False  # it reads the command's windows or peak (``given.Given``)

    def apply(self, g: ReplayGraph, x: float, given: Given | None
              ) -> tuple[ReplayGraph, list[str]]:
        """The transform on ``g``: with ``given`` where its row takes it."""
        return self.transform(g, x, given) if self.takes_given else self.transform(g, x)


SCENARIOS: dict[str, ScenarioSpec] = {s.name: s for s in (
    ScenarioSpec("cuda_graphs", cuda_graphs,
                 "no launch call inside a step (graphs are built per step)",
                 cpu_reason="a CPU trace has no launches to capture in a graph",
                 rewrites_launches=True, needs_steps="graphs are built per step",
                 help=("per thread and step, launches between synchronizing calls (and input "
                       "calls: a data loader is never inside a graph) become one graph launch "
                       "costing 1.58 µs of host time per kernel (learnt from the trace's own "
                       "graph launches where it has some, else the H100 `graph_torch` "
                       "capture's figure); host time between the launches goes; the graph's "
                       "first kernel starts once the call has enqueued it (its cost per "
                       "kernel) and the device's launch latency has passed, counted from the "
                       "call's start (as recorded graphs run: the call enqueues the rest "
                       "meanwhile), with the gap of the trace's own graph kernels (else the "
                       "device's gap between queued kernels), never more than the gap each "
                       "kernel had: removing launches never slows a device-bound step")),
    ScenarioSpec("fuse_pointwise", fuse_pointwise,
                 "no two elementwise kernels launched one after the other",
                 cpu_reason="a CPU trace has no kernel launches; its elementwise ops run "
                            "inline, and their fusion is not modelled",
                 rewrites_launches=True,
                 help=("runs of consecutive elementwise kernels launched one after the other "
                       "by one thread become one kernel lasting max(longest, total x "
                       "(k+2)/3k): each kernel moves 3 tensors, a fused run k+2")),
    ScenarioSpec("no_casts", no_casts, "no cast in the trace",
                 help="cast kernels and their launch calls removed"),
    ScenarioSpec("gemm_speedup", gemm_speedup, "no gemm or rnn work in the trace",
                 takes_factor=True,
                 help="gemm/rnn kernels X times faster"),
    ScenarioSpec("host_speedup", host_speedup, "no host time between calls",
                 takes_factor=True,
                 help="host gaps divided by X"),
    ScenarioSpec("merge_gemms", merge_gemms,
                 "no block of launches with a GEMM repeated back to back inside one "
                 "recurrence step",
                 cpu_reason="a CPU trace has no kernel launches; its GEMM ops run inline, "
                            "and merging them is not modelled",
                 rewrites_launches=True,
                 help=("inside one recurrence step, a block of launches holding a GEMM that is"
                       " repeated back to back (an LSTM's four gates computed one after the "
                       "other) becomes one block: each of its launches runs once on the "
                       "copies' data, lasting their total device time; the other copies' "
                       "launch calls and framework ops go")),
    ScenarioSpec("batch_input_gemms", batch_input_gemms,
                 "no GEMM call repeated back to back more times than one recurrence step "
                 "holds",
                 cpu_reason="a CPU trace has no kernel launches; its GEMM ops run inline, "
                            "and batching them is not modelled",
                 rewrites_launches=True,
                 help=("one GEMM call repeated back to back more times than one recurrence "
                       "step holds (the input projection of every time step, issued ahead of "
                       "the recurrence) becomes one GEMM call lasting their total device time;"
                       " work that waited for any of them waits for it")),
    ScenarioSpec("drop_stream_sync", drop_stream_sync,
                 "no event call, no stream bookkeeping op and one stream per device",
                 cpu_reason="a CPU trace has no streams or events to synchronize them",
                 rewrites_launches=True,
                 help=("event records, stream waits and event queries, the capture-status "
                       "query right before one, `aten::record_stream` ops and the host time "
                       "that issued them go; each device's work runs on one stream in launch "
                       "order")),
    ScenarioSpec("fuse_attention", fuse_attention,
                 "no softmax over [..., S, S] scores between batched matmuls with recorded "
                 "shapes, on a device whose peaks are known",
                 cpu_reason="a CPU trace has no attention kernels to fuse", takes_given=True,
                 help=("each unfused attention (softmax over `[..., S, S]` scores between two "
                       "batched matmuls, found from recorded shapes) becomes one fused kernel:"
                       " the kernels on the S×S tensor (softmax, mask, scale, dropout) go with"
                       " their launch calls, and the two matmuls together last the fused "
                       "kernel's modelled time: their FLOPs at 50% of the device's matrix peak"
                       " (FlashAttention-2 reaches 50-70% on A100/H100), or Q, K, V and the "
                       "output moved once at its bandwidth, whichever is longer")),
    ScenarioSpec("overlap_input", overlap_input,
                 "no input call (DataLoader __next__, IteratorGetNext, a data phase) with "
                 "host time inside it between calls",
                 help=("the next batch is ready when the step asks for it (loader workers or "
                       "prefetching prepare it beside the step): on each thread the host time "
                       "between calls that lies inside its input calls (a DataLoader's "
                       "`__next__`, tf.data's `IteratorGetNext`, a capture's `data` phase) "
                       "goes; runtime calls made inside them keep their time; on a CPU trace "
                       "the work ops inside them move to the workers")),
    ScenarioSpec("drop_host_stalls", drop_host_stalls,
                 "no untraced stretch of 1 ms or more and no OS wait between a launching "
                 "thread's calls",
                 cpu_reason="a CPU trace's host is its work: nothing waits for it",
                 help=("the host work on the launching threads that is not issuing device work"
                       " goes from the time between their calls: stretches of 1 ms or more "
                       "with nothing recorded on the thread (untraced work: preprocessing, "
                       "loading, logging) and the thread's OS waits (sleep, I/O, locks, time "
                       "scheduled out, where Nsight Systems recorded them); the calls, the "
                       "framework ops and the shorter gaps between them stay. What `advise` "
                       "prices when the host's cause is untraced work or the OS: the action is"
                       " to move that work off the thread or make the wait asynchronous")),
    ScenarioSpec("overlap_copies", overlap_copies,
                 "no host-to-device copy that no kernel overlaps inside the windows, or no "
                 "compute beside which it could run",
                 cpu_reason="a CPU trace has no host-to-device copies", takes_given=True,
                 help=("host-to-device copies that no kernel of their device overlapped "
                       "(inside the windows) run one step ahead, beside the kernels of the "
                       "step before (a batch prefetched to the device on a copy engine): each "
                       "copy hides behind as much compute as its own step's kernels take (a "
                       "steady run: the step before computes as long), shared by the copies of"
                       " that step in order, and what is longer stays; the host calls that "
                       "returned when the copy did (its own call, which a pageable copy holds "
                       "until its last chunk is staged; a call of another thread the driver "
                       "held) return when the shortened copy ends, and the host work the copy "
                       "released (a thread idle when it ended, a thread's first call after it)"
                       " starts that much sooner; the copy's launch and the host time before "
                       "it keep their place")),
)}
# the scenarios that rewrite launch calls (a trace without recorded launches has none)
LAUNCH_SCENARIOS = tuple(n for n, s in SCENARIOS.items() if s.rewrites_launches)
DEFAULT_SCENARIOS = ("cuda_graphs", "fuse_pointwise", "no_casts", "gemm_speedup=2",
                     "host_speedup=2")


def parse_scenarios(text: str) -> list[tuple[str, float]]:
    """A scenario or several applied together in one replay, joined by ``+``:
    ``fuse_pointwise+drop_stream_sync`` -> [("fuse_pointwise", 0), ("drop_stream_sync", 0)];
    applied in the order given."""
    parts = re.split(r"\+(?=[A-Za-z_])", text)
    names = [p.partition("=")[0] for p in parts]
    if len(set(names)) < len(names):
        raise UsageError(f"{text}: a scenario appears twice", option="scenario")
    return [parse_scenario(p) for p in parts]


def parse_scenario(text: str) -> tuple[str, float]:
    """``gemm_speedup=2`` -> ("gemm_speedup", 2.0); ``no_casts`` -> ("no_casts", 0)."""
    name, eq, arg = text.partition("=")
    if name not in SCENARIOS:
        raise UsageError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}",
                         option="scenario")
    needs = SCENARIOS[name].takes_factor
    if needs and not arg:
        raise UsageError(f"{name} needs a factor, e.g. {name}=2", option="scenario")
    if not needs and eq:
        raise UsageError(f"{name} takes no value", option="scenario")
    if not needs:
        return name, 0.0
    try:
        x = float(arg)
    except ValueError:
        raise UsageError(f"{name}={arg}: the factor is not a number",
                         option="scenario") from None
    if not x > 0 or not np.isfinite(x):
        raise UsageError(f"{name}={arg}: the factor must be a positive number",
                         option="scenario")
    return name, x
