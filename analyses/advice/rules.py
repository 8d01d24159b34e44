"""Advice: findings with their evidence (figures from the trace), an estimated saving
from ``whatif`` where a scenario models the fix, and an action. One small function per
rule; ``RULES`` is the list ``traceviz advise`` runs, in order.

Thresholds are stated in each rule (and in docs/advise.md); a rule that cannot judge
(no steps, no launches, nothing recorded) stays silent.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.algos.intervals import union_blocks
from traceviz.analyses.advice.actions import fusion_action, remedy
from traceviz.analyses.advice.base import Context, Finding, Rule, in_timed, no_loss
from traceviz.analyses.advice.efficiency import (
    memory_bound_gemms,
    memory_headroom,
    tensor_core_shapes,
    tf32_off,
    tf32_off_kernels,
)
from traceviz.analyses.advice.runs import (
    autocast_precision,
    fp32_run,
    host_bound_action,
    run_uses,
)
from traceviz.analyses.advice.streams import streams_never_overlap
from traceviz.analyses.advice.timing import noisy, profiled_unlike_timed
from traceviz.analyses.timed import TimedStep
from traceviz.analyses.work import analysis_windows, work_rows
from traceviz.table.launch_apis import is_graph_launch, is_sync_call
from traceviz.table.names import distinct_names
from traceviz.units import fmt_ns, fmt_pct, plural

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

HOST_BOUND = 0.25          # launch-bound share of the span (GPU)
FRAMEWORK_BOUND = 0.30     # framework overhead share (CPU)
SEQUENCE_MIN_PER_STEP = 8  # a pattern repeated per timestep
SEQUENCE_LENGTHS = range(3, 9)
CAST_OF_MATRIX = 0.10      # cast time / matrix time
LONG_GAP_NS = 1_000_000
LONG_GAPS_SHARE = 0.10
DATA_SHARE = 0.10
PAGEABLE_SHARE = 0.01      # pageable copy time / span, for a finding worth acting on
POINTWISE = ("elementwise", "cast", "reduction")


def _over(steps: int) -> str:
    """Whole-trace totals say so beside the per-step savings."""
    return f"in all {plural(steps, 'step')}" if steps else "over the whole trace"


def host_bound(ctx: Context) -> Finding | None:
    """GPU: the device waits for the host (nothing launched pending) >= 25% of the span.
    CPU: framework overhead (time outside work ops) >= 30%."""
    s = ctx.summary
    if s.cpu_trace:
        share = s.framework_overhead_fraction
        if share is None or share < FRAMEWORK_BOUND:
            return None
        return Finding(
            "host_bound", "Framework overhead dominates",
            [f"{fmt_pct(share)} of the span ({fmt_ns(s.span_ns - s.busy_ns)} of "
             f"{fmt_ns(s.span_ns)} {_over(s.steps)}) is outside the work ops",
             f"{s.kernel_count:,} work ops, median {fmt_ns(s.kernel_dur.median_ns)}"],
            remedy(ctx, "cut per-op overhead: TorchScript or torch.compile the step, fuse "
                         "small ops, or raise the batch size so each op does more",
                    "cut per-op overhead: compile the step with XLA "
                    "(tf.function(jit_compile=True); jax.jit), fuse small ops, or raise the "
                    "batch size so each op does more")
            if not (compiler := run_uses(ctx).compiler) else
            f"the step is already compiled ({compiler}): what is left is the overhead per "
            "compiled op; fewer, larger ops (more of the step in one compiled function, a "
            "loop unrolled) or a larger batch so each op does more",
            ctx.saving("host_speedup=2"), "host_speedup=2", {"overhead_fraction": share})
    share = s.launch_bound_fraction
    if share is None or share < HOST_BOUND:
        return None
    per_step = s.kernel_count / s.steps if s.steps else None
    lo = s.launches.kernel
    evidence = [f"the device waits for the host {fmt_pct(share)} of the span "
                f"({fmt_ns(s.host_wait_ns)} of {fmt_ns(s.span_ns)} {_over(s.steps)})",
                f"median kernel {fmt_ns(s.kernel_dur.median_ns)} vs median launch call "
                f"{fmt_ns(lo.call.median_ns)}"]
    uses = run_uses(ctx)
    if uses.graphed:  # the single launches left say nothing of the graphs' cost
        evidence.pop()
    if per_step:
        evidence.append(f"{per_step:,.0f} kernels per step")
    if uses.said(ctx.steps):
        evidence.append(uses.said(ctx.steps))
    # a graphed run has no launches left to capture: what the host itself costs decides
    scenario = "host_speedup=2" if uses.graphed else "cuda_graphs"
    saving = ctx.saving(scenario)
    if saving is not None and saving <= 0:
        return None  # its own replay finds the device, not the host, setting the pace
    return Finding(
        "host_bound", "Host-bound between graph launches: the GPU waits for the host"
        if uses.graphed else "Host-bound: the GPU waits for launches", evidence,
        host_bound_action(ctx, uses), saving, scenario,
        {"launch_bound_fraction": share, "kernels_per_step": per_step,
         "graphed": uses.graphed, "compiler": uses.compiler})


def kernel_sequences(ctx: Context) -> Finding | None:
    """The most repeated sequence of 3-8 consecutive kernels (work ops on a CPU) on one
    stream, HTA's "frequent CUDA kernel sequences": a pattern repeated >= 8 times per step
    is a per-timestep pattern, a fusion candidate; fusing it saves (length - 1) launches
    per repetition."""
    if not ctx.steps or ctx.trace.is_cpu:  # launches and kernel fusion: a GPU's matter
        return None
    work = work_rows(ctx.trace)
    # a graph launch already runs its kernels without one launch each
    graph = per_distinct(work["launch_api"], each(is_graph_launch), fill=False).astype(bool)
    work = work[(work["step"] >= 0) & ~graph].sort_values(["device", "stream", "ts_ns"],
                                                          kind="stable")
    if len(work) < 2 * SEQUENCE_MIN_PER_STEP:
        return None
    codes = work["name"].cat.codes.to_numpy(np.int64) + 1
    stream = work.groupby(["device", "stream"], sort=False, observed=True).ngroup().to_numpy()
    pointwise = work["category"].isin(POINTWISE).to_numpy()
    best = None
    for n in SEQUENCE_LENGTHS:
        found = _top_ngram(codes, stream, pointwise, n)
        if found is None:
            continue
        start, count = found
        saved = count * (n - 1)
        if best is None or saved > best[2]:
            best = (start, n, saved, count)
    if best is None:
        return None
    start, n, saved, count = best
    per_step = count / ctx.steps
    if per_step < SEQUENCE_MIN_PER_STEP:
        return None
    names = [str(x) for x in work["name"].iloc[start:start + n]]
    cats = [str(x) for x in work["category"].iloc[start:start + n]]
    pointwise = all(c in POINTWISE for c in cats)
    # fuse_pointwise models every pointwise run of the trace: its saving is this
    # finding's only when the sequence is all pointwise
    fuse = ctx.saving("fuse_pointwise") if pointwise else None
    return Finding(
        "kernel_sequences", f"A sequence of {n} kernels repeats {per_step:,.0f} times per step",
        [" -> ".join(distinct_names(list(names), 60)),
         f"{count:,} times in {plural(ctx.steps, 'step')}; categories: {', '.join(cats)}",
         f"fused into one kernel: {(n - 1) * per_step:,.0f} launches fewer per step",
         *(["the saving is fuse_pointwise's over every pointwise run of the trace"]
           if fuse is not None else [])],
        fusion_action(ctx, work, names[0]) + ("" if pointwise else
                                                 "; it holds non-pointwise kernels, so "
                                                 "fusion needs a compiler or a fused op"),
        fuse, "fuse_pointwise" if fuse is not None else None,
        {"sequence": names, "per_step": per_step, "launches_saved_per_step":
         (n - 1) * per_step})


def _top_ngram(codes: np.ndarray, stream: np.ndarray, pointwise: np.ndarray, n: int
               ) -> tuple[int, int] | None:
    """First start and count of the most frequent n-gram on one stream holding at least
    two pointwise kernels (what fusion can merge; cuDNN's own gemm/cell pattern is not a
    candidate)."""
    m = len(codes) - n + 1
    if m <= 0:
        return None
    key = np.zeros(m, np.uint64)
    same = np.ones(m, bool)
    points = np.zeros(m, np.int64)
    for j in range(n):  # per position in the n-gram, not per event
        key = key * np.uint64(1_000_003) + codes[j:j + m].astype(np.uint64)
        same &= stream[j:j + m] == stream[:m]
        points += pointwise[j:j + m]
    same &= points >= 2
    starts = np.flatnonzero(same)
    key = key[same]
    if len(key) == 0:
        return None
    uniq, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    best = None
    # repetitions that overlap (abab matches "abab" twice in "ababab") cannot both be
    # fused: count the non-overlapping ones of the few most frequent n-grams
    for k in np.argsort(-counts, kind="stable")[:3]:
        at = starts[inverse == k]
        taken, last = 0, -n
        for p in at:  # per occurrence of one n-gram
            if p >= last + n:
                taken, last = taken + 1, p
        if best is None or taken > best[1]:
            best = (int(at[0]), taken)
    return best


def casts(ctx: Context) -> Finding | None:
    """Cast time >= 10% of matrix (gemm/attention/rnn) time: AMP's conversions eat into
    what its faster matrices save."""
    s = ctx.summary
    c = s.casts
    if not c.count:
        return None
    # without recorded dtypes a conversion op may change no precision (Keras casts its
    # integer step counter): in a FP32 run they are no mixed precision's cost
    if not ctx.trace.meta.get("dtypes_recorded") and fp32_run(ctx):
        return None
    cats = s.categories.set_index("category")["total_ns"] if len(s.categories) else pd.Series()
    matrix = int(sum(cats.get(k, 0) for k in ("gemm", "attention", "rnn")))
    ratio = c.total_ns / matrix if matrix else None
    if ratio is not None and ratio < CAST_OF_MATRIX:
        return None
    return Finding(
        "casts", "Casts take " + (f"{fmt_pct(ratio)} of the matrix time" if ratio is not None
                                  else "time and no matrix work is recorded"),
        [f"in the trace: cast time {fmt_ns(c.total_ns)} ({c.count:,} cast kernels) vs matrix "
         f"time "
         f"{fmt_ns(matrix)}" + (f": {fmt_pct(ratio)}" if ratio is not None else ""),
         f"cast share of busy time {fmt_pct(c.share_of_busy)}"],
        remedy(ctx, "check that AMP pays here (`traceviz amp FP32_RUN AMP_RUN`); keep "
                     "weights in the low precision (model.half()/bfloat16 parameters) or cast "
                     "once outside the timestep loop; larger matrices amortize the casts",
                "check that mixed precision pays here (`traceviz amp FP32_RUN AMP_RUN`); "
                "cast inputs once outside the timestep loop rather than per step; larger "
                "matrices amortize the casts"),
        ctx.saving("no_casts"), "no_casts", {"cast_ns": c.total_ns, "matrix_ns": matrix})


def _sync_calls(ctx: Context) -> pd.DataFrame:
    ev = ctx.trace.events
    rt = ev[(ev["kind"] == "runtime") & (ev["step"] >= 0)]
    return rt[per_distinct(rt["name"], each(is_sync_call)).astype(bool)]


def syncs_in_steps(ctx: Context) -> Finding | None:
    """More than one synchronizing call per step (one at the step's end is how a
    benchmark times a step; more stall the host mid-step)."""
    if not ctx.steps or ctx.trace.is_cpu:
        return None
    calls = _sync_calls(ctx)
    if calls.empty:
        return None
    per_step = calls.groupby("step").size()
    extra = int((per_step - 1).clip(lower=0).sum())
    if extra < ctx.steps:  # fewer than one extra per step
        return None
    blocked = int(calls["dur_ns"].sum())
    names = ", ".join(f"{n} x{k}" for n, k in calls["name"].astype(str).value_counts()
                      .head(3).items())
    return Finding(
        "syncs_in_steps", "The host synchronizes with the GPU inside steps",
        [f"{plural(len(calls), 'synchronizing call')} in {plural(ctx.steps, 'step')} "
         f"({len(calls) / ctx.steps:.1f} per step): {names}",
         f"the host spent {fmt_ns(blocked)} in them"],
        "move .item(), .cpu(), printing of tensors and explicit synchronize calls out of "
        "the step (log every N steps), and copy with non_blocking=True",
        None, None, {"per_step": len(calls) / ctx.steps, "blocked_ns": blocked})


PAGEABLE = re.compile(r"pageable", re.IGNORECASE)


def pageable_memcpy(ctx: Context) -> Finding | None:
    """Copies from or to pageable host memory: synchronous, and slower than pinned."""
    ev = ctx.trace.events
    m = ev[ev["kind"] == "memcpy"]
    if m.empty:
        return None
    pageable = per_distinct(m["name"], each(lambda x: bool(PAGEABLE.search(x)))).astype(bool)
    p = m[pageable]
    if p.empty:
        return None
    # worth acting on: the copies, or the host calls they block (a pageable copy is
    # synchronous), take a share of the span; 2 copies of 16 bytes are not
    host_ns = int(p["launch_dur_ns"].fillna(0).sum())
    if max(int(p["dur_ns"].sum()), host_ns) < PAGEABLE_SHARE * max(ctx.summary.span_ns, 1):
        return None
    known = p["bytes"] >= 0
    size = f", {int(p.loc[known, 'bytes'].sum()):,} bytes" if known.any() else ""
    return Finding(
        "pageable_memcpy", "Copies use pageable host memory",
        [f"{len(p):,} of {len(m):,} copies are pageable ({fmt_ns(int(p['dur_ns'].sum()))} "
         f"of copy time{size}; their calls held the host {fmt_ns(host_ns)})",
         ", ".join(f"{n} x{k}" for n, k in p["name"].astype(str).value_counts().head(2)
                   .items())],
        "pin host buffers (DataLoader(pin_memory=True), tensor.pin_memory()) and copy "
        "with non_blocking=True",
        None, None, {"count": len(p), "ns": int(p["dur_ns"].sum())})


def long_gaps(ctx: Context) -> Finding | None:
    """Idle stretches of >= 1 ms inside the windows, together >= 10% of the span."""
    work = work_rows(ctx.trace)
    windows = analysis_windows(ctx.trace, work)
    total, count, longest = 0, 0, 0
    for device, w in windows.items():
        rows = work[work["device"] == device]
        s = rows["ts_ns"].to_numpy(np.int64)
        bs, be = union_blocks(s, s + rows["dur_ns"].to_numpy(np.int64))
        ws, we = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
        gs, ge = _idle_in(bs, be, ws, we)
        length = ge - gs
        big = length >= LONG_GAP_NS
        total += int(length[big].sum())
        count += int(big.sum())
        longest = max(longest, int(length.max()) if len(length) else 0)
    span = ctx.summary.span_ns
    if not span or total < LONG_GAPS_SHARE * span:
        return None
    s = ctx.summary
    cause = "the host (nothing launched was pending)" if (s.host_wait_ns or 0) >= \
        (s.queued_idle_ns or 0) else "dependencies or synchronization (launched work waited)"
    return Finding(
        "long_gaps", "Long idle gaps on the device",
        [f"{plural(count, 'gap')} of >= {fmt_ns(LONG_GAP_NS)}, {fmt_ns(total)} in all "
         f"({fmt_pct(total / span)} of the span), longest {fmt_ns(longest)}",
         f"most idle time waits for {cause}"],
        "look at what the host does in the gaps (traceviz analyze --plot, the phases): "
        "data loading, logging, checkpointing or a synchronizing call; overlap it with "
        "device work",
        None, None, {"count": count, "total_ns": total, "longest_ns": longest})


def _idle_in(bs: np.ndarray, be: np.ndarray, ws: np.ndarray, we: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """The idle intervals (complement of the busy blocks) clipped to the windows."""
    gap_s = np.concatenate([[np.iinfo(np.int64).min], be])
    gap_e = np.concatenate([bs, [np.iinfo(np.int64).max]])
    out_s, out_e = [], []
    for a, b in zip(ws, we, strict=True):  # per window, few
        s = np.maximum(gap_s, a)
        e = np.minimum(gap_e, b)
        keep = e > s
        out_s.append(s[keep])
        out_e.append(e[keep])
    if not out_s:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_s), np.concatenate(out_e)


def data_stalls(ctx: Context) -> Finding | None:
    """The ``data`` phase takes >= 10% of the span: the step waits for its batch."""
    p = ctx.summary.phases
    if p.empty or "data" not in set(p["phase"]):
        return None
    data = p.set_index("phase").loc["data"]
    wall = int(data["wall_ns"])
    span = ctx.summary.span_ns
    devices = max(len(ctx.summary.devices), 1)
    share = wall / (span / devices) if span else 0
    if share < DATA_SHARE:
        return None
    workers = ctx.trace.meta.get("workers")
    return Finding(
        "data_stalls", "Steps wait for data",
        [f"the data phase takes {fmt_ns(wall)}, {fmt_pct(share)} of the step time",
         f"data loader workers: {workers if workers is not None else 'not recorded'}"],
        "load batches in parallel with the step: more DataLoader workers (`--workers N` "
        "in traceviz capture), pin_memory=True, prefetching; as in the MXNet/PyTorch "
        "comparison, workers hide loading behind compute",
        None, None, {"data_ns": wall, "share": share})


RULES: tuple[Rule, ...] = (host_bound, kernel_sequences, casts, autocast_precision,
                           syncs_in_steps,
                           pageable_memcpy, long_gaps, data_stalls, tensor_core_shapes,
                           tf32_off, tf32_off_kernels, memory_bound_gemms, memory_headroom,
                           noisy, profiled_unlike_timed, streams_never_overlap)


def advise(trace: Trace) -> tuple[list[Finding], int]:
    """Every rule's finding on ``trace``, biggest estimated saving first, and the number
    of steps the savings are over."""
    found, steps, _ = advise_timed(trace)
    return found, steps


def advise_timed(trace: Trace) -> tuple[list[Finding], int, TimedStep | None]:
    """``advise``, and the run's profiled and timed step the savings were carried by."""
    ctx = Context(trace)
    found, steps = _advise(ctx)
    return found, steps, ctx.timed


def _advise(ctx: Context) -> tuple[list[Finding], int]:
    found = [in_timed(no_loss(f), ctx) for rule in RULES if (f := rule(ctx)) is not None]
    # the biggest saving in the time a user pays first (profiled where no timed step)
    return sorted(found, key=lambda f: -(f.timed_saving_ns_per_step
                                         if f.timed_saving_ns_per_step is not None
                                         else (f.saving_ns or 0) / max(ctx.steps, 1))), \
        ctx.steps

