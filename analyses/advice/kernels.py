"""Advice on what the kernels are (theme ``kernels``): a repeated sequence worth fusing,
half-precision matrix shapes tensor cores cannot take whole, memory-bound matrix ops (from
the efficiency figures, ``analyses/efficiency/ops.py``). ``rules.py`` registers them."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.analyses.advice.actions import cores, fusion_action, remedy
from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.advice.run_uses import holds_lstm
from traceviz.analyses.work import missing_activity, work_rows
from traceviz.table.classify import MATRIX_OPS
from traceviz.table.launch_apis import is_graph_launch, launch_kind
from traceviz.table.names import distinct_names
from traceviz.units import fmt_ns, fmt_pct, plural

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

SEQUENCE_MIN_PER_STEP = 8  # a pattern repeated per timestep
SEQUENCE_LENGTHS = range(3, 9)
POINTWISE = ("elementwise", "cast", "reduction")
TENSOR_CORE_MULTIPLE = 8
MEMORY_BOUND_SHARE = 0.10  # memory-bound matrix time / kernel time


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
        # told apart from every kernel of the trace, not only from these
        [" -> ".join(distinct_names(
            names, 60, among=work["name"].cat.remove_unused_categories().cat.categories)),
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


def tensor_core_shapes(ctx: Context) -> Finding | None:
    """fp16/bf16 matrix ops with a dimension (> 1) that is not a multiple of 8: GPU tensor
    cores cannot take them whole (from the shapes torch.profiler's record_shapes keeps,
    which the Kineto parser stores in the ops' ``details``)."""
    ev = ctx.trace.events
    ops = ev[(ev["kind"] == "op") & ev["name"].isin(MATRIX_OPS)]
    if ops.empty:
        return None
    misfit = per_distinct(ops["details"], each(_tensor_core_misfit), fill="").astype(str)
    hit = misfit != ""
    if not hit.any():
        return None
    rows = ops[hit]
    examples = (rows["name"].astype(str) + " " + pd.Series(misfit[hit], index=rows.index)
                ).value_counts()
    return Finding(
        "tensor_core_shapes", f"Half-precision matrices that {cores(ctx)} cannot take whole",
        [f"{len(rows):,} fp16/bf16 matrix ops have a dimension that is not a multiple of "
         f"{TENSOR_CORE_MULTIPLE} ({fmt_ns(int(rows['dur_ns'].sum()))} of op time)",
         "e.g. " + "; ".join(f"{d} x{k}" for d, k in examples.head(3).items())],
        f"pad hidden size, embedding size, vocabulary and batch to multiples of "
        f"{TENSOR_CORE_MULTIPLE} (16 for int8/fp8)",
        None, None, {"ops": len(rows)})


def _tensor_core_misfit(details: str) -> str:
    """``dims:[[20, 100], [100, 400]] types:['c10::BFloat16', ...]`` -> the dims when a
    half-precision op has a matrix dimension (> 1) off the multiple, else "". Matrix
    dimensions: the last two of each input of 2 or more dimensions (bias vectors aside);
    the leading dimensions of the first input flatten into its rows (a linear over
    [seq, batch, features] multiplies seq x batch rows; for bmm that is batch x rows)."""
    dims_text, _, types = details.partition(" types:")
    if not dims_text.startswith("dims:") or ("Half" not in types and "BFloat16" not in types):
        return ""
    try:
        inputs = json.loads(dims_text[5:])
    except (ValueError, RecursionError):
        return ""
    matrix: list[int] = []
    for shape in inputs:
        if not isinstance(shape, list) or len(shape) < 2 or not all(
                isinstance(d, int) for d in shape):
            continue
        matrix += [math.prod(shape[:-1]), shape[-1]] if len(shape) > 2 and not matrix \
            else shape[-2:]
    # written on one line: some traces keep the dims as indented JSON over many lines
    return json.dumps(inputs) if any(d > 1 and d % TENSOR_CORE_MULTIPLE for d in matrix) \
        else ""


def memory_bound_gemms(ctx: Context) -> Finding | None:
    """Matrix op groups below the roofline's ridge point (memory-bound), >= 10% of kernel
    time: their operands are too small to keep the math units busy."""
    e = ctx.summary.efficiency
    if e is None or e.peak is None or not e.time_ns:
        return None
    g = e.groups
    mem = g[(g["unit"] == "matrix") & (g["bound"] == "memory")]
    share = float(mem["time_ns"].sum()) / e.time_ns
    if share < MEMORY_BOUND_SHARE:
        return None
    top = mem.iloc[0]
    ridge = e.peak.figures.get(str(top["peak_key"]), np.nan) * 1e3 / (e.peak.bandwidth or
                                                                      np.nan)
    return Finding(
        "memory_bound_gemms", "Matrix ops are memory-bound: the operands are too small",
        [f"{len(mem)} matrix op groups below the ridge point take {fmt_pct(share)} of "
         f"kernel time ({fmt_ns(int(mem['time_ns'].sum()))})",
         f"largest: {top['op']} {top['dims']}: {top['intensity']:.1f} FLOP/byte against "
         f"the {top['peak_key']} ridge of {ridge:.0f} on the {e.peak.device}"],
        "give each matrix op more work: a larger batch (FLOP per byte grows with it), "
        + ("fused gates (one GEMM for the four LSTM gates and all time steps' input "
           "projection, as cuDNN's LSTM does), " if holds_lstm(ctx) else
           "fewer, wider matrix products (projections that share an input fused into one), ")
        + "or fewer, larger layers",
        None, None, {"share": share, "groups": len(mem)})


def no_kernel_activity(ctx: Context) -> Finding | None:
    """Kernel launch calls with no kernel, memcpy or memset record: the profiler recorded
    the host side only. The device's time is unknown, so no computation rule can judge
    the trace (``engine`` runs none after this one); what to re-record with is the
    finding."""
    line = missing_activity(ctx.trace)
    if line is None:
        return None
    ev = ctx.trace.events
    calls = ev["name"][(ev["kind"] == "runtime").to_numpy()]
    kinds = pd.Series(per_distinct(calls, each(launch_kind), fill=None))
    by_api = calls.astype(str)[(kinds == "kernel").to_numpy()].value_counts()
    apis = ", ".join(f"{name} {n:,}" for name, n in by_api.items())
    action = remedy(
        ctx,
        "re-record with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
        "ProfilerActivity.CUDA]) (ProfilerActivity.CUDA records HIP kernels too) and check "
        "that CUPTI loads: a 'CUPTI ... failed' warning, a missing libcupti or CUPTI "
        "collecting hardware counters keeps the kernels out",
        "re-record with the device tracer on (tf.profiler.experimental.ProfilerOptions("
        "device_tracer_level=1)) and check that CUPTI (libcupti) is on the library path: "
        "without it the profiler records the host only",
        jax="re-record with jax.profiler (it traces the GPU by default) and check that "
            "CUPTI (libcupti) is on the library path: without it the profiler records the "
            "host only")
    return Finding(
        "no_kernel_activity",
        "No kernel records: the device's time is unknown",
        [f"{line} ({apis}; no kernel, memcpy or memset row)",
         "busy and idle time, FLOP rates, the critical path and what-if savings need the "
         "kernels' time: none is made from the host's"],
        action,
        figures={"launches": ctx.trace.kernel_launch_calls, "kernels": 0})
