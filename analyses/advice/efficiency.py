"""Advice rules about how matrix work uses the hardware: half-precision shapes tensor cores
cannot take whole, FP32 GEMMs left off TF32 tensor cores, memory-bound GEMMs (from the
efficiency figures, ``analyses/efficiency/ops.py``), memory headroom. ``advice.RULES`` runs
them."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.analyses.advice.actions import remedy
from traceviz.analyses.advice.base import Context, Finding
from traceviz.analyses.advice.runs import holds_lstm
from traceviz.analyses.work import work_rows
from traceviz.table.classify import MATRIX_OPS
from traceviz.units import fmt_bytes, fmt_ns, fmt_pct

TF32_SHARE = 0.10        # FP32 GEMM time on FP32 kernels / kernel time, with TF32 available
MEMORY_BOUND_SHARE = 0.10  # memory-bound matrix time / kernel time
HEADROOM = 2.0           # device memory / peak allocated, for the headroom finding
TENSOR_CORE_MULTIPLE = 8
AMD_DEVICE = re.compile(r"\bAMD\b|Instinct|Radeon|\bMI\d{3}", re.IGNORECASE)

# FP32 GEMM kernels without op shapes: what TF32 is taken to buy them, for the saving
KERNELS_TF32_SPEEDUP = 2.0

def _cores(ctx: Context) -> str:
    """What the vendor calls its matrix units: AMD's matrix cores, NVIDIA's tensor cores."""
    devices = ctx.trace.meta.get("devices") or {}
    names = devices.values() if isinstance(devices, dict) else []
    apis = ctx.trace.events["launch_api"]
    apis = apis.cat.categories if isinstance(apis.dtype, pd.CategoricalDtype) else apis.unique()
    amd = any(AMD_DEVICE.search(str(n)) for n in names) or any(
        str(a).startswith("hip") for a in apis)
    return "matrix cores" if amd else "tensor cores"


def tf32_off(ctx: Context) -> Finding | None:
    """FP32 matrix ops that ran on FP32 (non-tensor-core) kernels on a device with TF32
    tensor cores, >= 10% of kernel time. Saving: the replay with the matrix time shortened
    as these groups would run at TF32 (each sped up to the lower of its roof at the TF32
    peak and the TF32/FP32 peak ratio), applied as one factor to all matrix kernels."""
    e = ctx.summary.efficiency
    if e is None or e.peak is None or "tf32" not in e.peak.figures or not e.time_ns:
        return None
    g = e.groups
    fp32 = g[(g["unit"] == "matrix") & (g["precision"] == "fp32") & (g["peak_key"] == "fp32")
             & g["tflops"].notna()]
    share = float(fp32["time_ns"].sum()) / e.time_ns
    if share < TF32_SHARE:
        return None
    tf32, bw = e.peak.figures["tf32"], e.peak.bandwidth or np.inf
    roof = np.minimum(tf32, fp32["intensity"].fillna(np.inf).to_numpy(float) * bw / 1e3)
    speedup = np.clip(roof / fp32["tflops"].to_numpy(float), 1.0,
                      tf32 / e.peak.figures["fp32"])
    before = float(fp32["time_ns"].sum())
    after = float((fp32["time_ns"].to_numpy(float) / speedup).sum())
    matrix = float(ctx.summary.categories.set_index("category")["total_ns"].reindex(
        ["gemm", "rnn", "attention"]).fillna(0).sum())
    factor = matrix / (matrix - before + after) if matrix > before - after > 0 else 1.0
    scenario = f"gemm_speedup={factor:.3g}"
    top = fp32.iloc[0]
    saving = ctx.saving_of(scenario)
    why_not = [] if saving is None or saving > 0 else [
        "the replay finds no saving per step: the device time saved does not shorten the "
        "step while it waits for the host or other work (see the findings above)"]
    return Finding(
        "tf32_off", f"FP32 matrix ops run without the TF32 {_cores(ctx)}",
        [f"{len(fp32)} FP32 matrix op groups ran FP32 kernels: {fmt_ns(before)} = "
         f"{fmt_pct(share)} of kernel time, at up to {fp32['tflops'].max():.1f} TFLOP/s "
         f"against the {e.peak.device}'s {e.peak.figures['fp32']:g} TFLOP/s FP32 and "
         f"{tf32:g} TFLOP/s TF32 peaks",
         f"largest: {top['op']} {top['dims']} ({fmt_ns(int(top['time_ns']))}, "
         f"{fmt_pct(top['pct_peak'])} of the FP32 peak)",
         f"at TF32 they would take about {fmt_ns(after)} (each sped up by the TF32/FP32 "
         "peak ratio, or less where its roofline at the TF32 peak allows less); the replay "
         f"applies that as {scenario} to all matrix kernels", *why_not],
        "allow TF32 for matmuls where FP32's 23-bit mantissa is not needed: "
        "torch.backends.cuda.matmul.allow_tf32 = True (or "
        "torch.set_float32_matmul_precision('high')); or train in bf16 (--amp bf16)",
        saving, scenario,
        {"fp32_matrix_ns": int(before), "share": share, "speedup": factor})


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
           "projection, as fused_torch and cuDNN do), " if holds_lstm(ctx) else
           "fewer, wider matrix products (projections that share an input fused into one), ")
        + "or fewer, larger layers",
        None, None, {"share": share, "groups": len(mem)})


def memory_headroom(ctx: Context) -> Finding | None:
    """The timed batches' peak allocated memory is under half of the device's memory:
    the batch could grow (about device memory / peak, if memory grows with the batch)."""
    mem = (ctx.trace.meta.get("bench") or {}).get("memory") or {}
    peak, total = mem.get("peak_allocated_bytes"), mem.get("total_bytes")
    if not peak or not total or total / peak < HEADROOM:
        return None
    times = int(total // peak)
    return Finding(
        "memory_headroom", f"The run uses 1/{times} of the device's memory",
        [f"peak allocated {fmt_bytes(peak)} of {fmt_bytes(total)} "
         f"({fmt_pct(peak / total)}) during the timed batches"],
        f"the batch could grow up to about {times}x (less: weights and workspaces do not "
        "grow with it); a larger batch raises every matrix op's FLOP per byte",
        None, None, {"peak_allocated_bytes": peak, "total_bytes": total, "times": times})


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
        "tensor_core_shapes", f"Half-precision matrices that {_cores(ctx)} cannot take whole",
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
    return dims_text[5:] if any(d > 1 and d % TENSOR_CORE_MULTIPLE for d in matrix) else ""


def tf32_off_kernels(ctx: Context) -> Finding | None:
    """FP32 GEMM kernels on the FMA units (by name: cuBLAS ``ffma``/``sgemm``, CUTLASS
    ``simt_sgemm``) >= 10% of kernel time on a device with TF32 tensor cores, where no op
    group shows it (compiled code records no shapes: ``tf32_off`` cannot see them)."""
    from traceviz.analyses.efficiency.run import fma_gemms

    e = ctx.summary.efficiency
    if e is None or e.peak is None or "tf32" not in e.peak.figures or not e.time_ns:
        return None
    g = e.groups
    seen = g[(g["unit"] == "matrix") & (g["precision"] == "fp32") & (g["peak_key"] == "fp32")]
    if float(seen["time_ns"].sum()) >= TF32_SHARE * e.time_ns:
        return None  # tf32_off speaks of them, with their op groups
    work = work_rows(ctx.trace)
    f = fma_gemms(work[(work["kind"] == "kernel").to_numpy()])
    fma_ns = float(f["time_ns"].sum()) if len(f) else 0.0
    if fma_ns < TF32_SHARE * e.time_ns:
        return None
    n = int(f["kernels"].sum())
    per = f" ({n / ctx.steps:,.0f} per step)" if ctx.steps else ""
    fig = e.peak.figures
    return Finding(
        "tf32_off", f"FP32 GEMMs run on the FMA units, not the TF32 {_cores(ctx)}",
        [f"{n:,} FP32 GEMM kernels{per} ran without TF32: {fmt_ns(fma_ns)} = "
         f"{fmt_pct(fma_ns / e.time_ns)} of kernel time",
         f"the {e.peak.device}'s FP32 peak is {fig['fp32']:g} TFLOP/s, its TF32 tensor-core "
         f"peak {fig['tf32']:g} TFLOP/s",
         f"largest: {f['name'].iloc[0][:90]} ({fmt_ns(int(f['time_ns'].iloc[0]))})",
         f"no op shapes, so no roofline per GEMM: the saving is the replay's with every "
         f"matrix kernel {KERNELS_TF32_SPEEDUP:g}x faster (small GEMMs are latency-bound: "
         f"the {fig['tf32'] / fig['fp32']:.1f}x peak ratio is out of reach)"],
        remedy(ctx, "allow TF32 for matmuls where FP32's 23-bit mantissa is not needed: "
                    "torch.backends.cuda.matmul.allow_tf32 = True (or "
                    "torch.set_float32_matmul_precision('high'), which torch.compile "
                    "honours); or run in bf16 (--amp bf16)",
               "allow TF32 for matmuls: jax.default_matmul_precision('tensorfloat32') "
               "(JAX), tf.config.experimental.enable_tensor_float_32_execution(True) "
               "(TensorFlow); or run in bf16"),
        ctx.saving_of(f"gemm_speedup={KERNELS_TF32_SPEEDUP:g}"),
        f"gemm_speedup={KERNELS_TF32_SPEEDUP:g}", {"fp32_fma_ns": int(fma_ns), "kernels": n})
