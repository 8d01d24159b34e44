"""Advice on the precision the work runs in (theme ``precision``): casts that eat what
mixed precision saves, bf16 autocast that ran FP16, FP32 matrices left off the TF32 tensor
cores (by op group, or by kernel name where no op shapes were recorded). ``rules.py``
registers them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.analyses.advice.actions import capture_option, cores, remedy
from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.advice.run_uses import fp32_run
from traceviz.analyses.work import work_rows
from traceviz.opcost.peaks import tf32_speedup
from traceviz.units import fmt_ns, fmt_pct

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

CAST_OF_MATRIX = 0.10      # cast time / matrix time
TF32_SHARE = 0.10        # FP32 GEMM time on FP32 kernels / kernel time, with TF32 available


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


def autocast_precision(ctx: Context) -> Finding | None:
    """bf16 autocast whose matrix ops ran FP16 (cuDNN's LSTM under torch.autocast): the
    user asked for one precision and got another, with weight copies per call."""
    from traceviz.analyses.compare.amp_precision import precision_mismatch

    m = precision_mismatch(ctx.trace)
    if m is None:
        return None
    return Finding(
        "autocast_precision", f"Asked for {m.asked}, the LSTM ran {m.ran}",
        [m.text(), "the recorded dtypes show the cuDNN RNN call under bf16 autocast taking "
         "half tensors: its FP32 weights were copied to half on every call"],
        "for bf16 throughout, keep the LSTM itself in bf16 (lstm.to(torch.bfloat16), inputs "
        "bf16) so no copy runs per call; or ask for fp16 ("
        + capture_option(ctx, "--amp fp16, ") + "a GradScaler when training), which is "
        "what ran",
        None, None, m.to_dict())


# TF32 in each XLA front end's words
TF32_TF = ("allow TF32 for matmuls: tf.config.experimental.enable_tensor_float_32_execution("
           "True); or run in mixed precision (keras.mixed_precision.set_global_policy("
           "'mixed_bfloat16'))")
TF32_JAX = ("allow TF32 for matmuls: jax.default_matmul_precision('tensorfloat32') (or the "
            "jax_default_matmul_precision option); or run in bf16")


def tf32_off(ctx: Context) -> Finding | None:
    """FP32 matrix ops that ran on FP32 (non-tensor-core) kernels on a device with TF32
    tensor cores, >= 10% of kernel time. Saving: the replay with the matrix time shortened
    as these groups would run at TF32 (``peaks.tf32_speedup``, the one model: each
    group's roofline time at FP32 over its roofline time at TF32, from its shapes),
    applied as one factor to all matrix kernels."""
    e = ctx.summary.efficiency
    if e is None or e.peak is None or "tf32" not in e.peak.figures or not e.time_ns:
        return None
    g = e.groups
    fp32 = g[(g["unit"] == "matrix") & (g["precision"] == "fp32") & (g["peak_key"] == "fp32")
             & g["tflops"].notna()]
    share = float(fp32["time_ns"].sum()) / e.time_ns
    if share < TF32_SHARE:
        return None
    tf32 = e.peak.figures["tf32"]
    speedup = tf32_speedup(fp32["flops"].to_numpy(float), fp32["bytes"].to_numpy(float),
                           e.peak)
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
        "tf32_off", f"FP32 matrix ops run without the TF32 {cores(ctx)}",
        [f"{len(fp32)} FP32 matrix op groups ran FP32 kernels: {fmt_ns(before)} = "
         f"{fmt_pct(share)} of kernel time, at up to {fp32['tflops'].max():.1f} TFLOP/s "
         f"against the {e.peak.device}'s {e.peak.figures['fp32']:g} TFLOP/s FP32 and "
         f"{tf32:g} TFLOP/s TF32 peaks",
         f"largest: {top['op']} {top['dims']} ({fmt_ns(int(top['time_ns']))}, "
         f"{fmt_pct(top['pct_peak'])} of the FP32 peak)",
         f"at TF32 they would take about {fmt_ns(after)} (each by its roofline: its time "
         "at the FP32 peak or its bytes' time, whichever is longer, over the same at the "
         f"TF32 peak: {_speedups(speedup)}; a small GEMM's bytes bound it at TF32); the "
         f"replay applies that as {scenario} to all matrix kernels", *why_not],
        remedy(ctx, "allow TF32 for matmuls where FP32's 23-bit mantissa is not needed: "
                    "torch.backends.cuda.matmul.allow_tf32 = True (or "
                    "torch.set_float32_matmul_precision('high')); or "
                    + ("train" if ctx.run.mode == "training" else "run") + " in bf16"
                    + capture_option(ctx, " (--amp bf16)"), TF32_TF, TF32_JAX,
               none="allow TF32 for matmuls: cublasSetMathMode(handle, "
                    "CUBLAS_TF32_TENSOR_OP_MATH), or compute in half or bf16"),
        saving, scenario,
        {"fp32_matrix_ns": int(before), "share": share, "speedup": factor,
         "group_speedups": [float(x) for x in speedup]})


def _speedups(x: np.ndarray) -> str:
    lo, hi = float(np.min(x)), float(np.max(x))
    return f"{lo:.2f}x" if hi - lo < 0.005 else f"{lo:.2f}x to {hi:.2f}x"


def tf32_off_kernels(ctx: Context) -> Finding | None:
    """FP32 GEMM kernels on the FMA units (by name: cuBLAS ``ffma``/``sgemm``, CUTLASS
    ``simt_sgemm``) >= 10% of kernel time on a device with TF32 tensor cores, where no op
    group shows it (compiled code records no shapes: ``tf32_off`` cannot see them)."""
    from traceviz.analyses.efficiency.workload import fma_gemms

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
    # the one model with no shapes: its figure for a GEMM of unknown shape
    unknown = float(tf32_speedup(np.array([np.nan]), np.array([np.nan]), e.peak)[0])
    return Finding(
        "tf32_off", f"FP32 GEMMs run on the FMA units, not the TF32 {cores(ctx)}",
        [f"{n:,} FP32 GEMM kernels{per} ran without TF32: {fmt_ns(fma_ns)} = "
         f"{fmt_pct(fma_ns / e.time_ns)} of kernel time",
         f"the {e.peak.device}'s FP32 peak is {fig['fp32']:g} TFLOP/s, its TF32 tensor-core "
         f"peak {fig['tf32']:g} TFLOP/s",
         f"largest: {f['name'].iloc[0][:90]} ({fmt_ns(int(f['time_ns'].iloc[0]))})",
         f"no op shapes, so no roofline per GEMM: the saving is the replay's with every "
         f"matrix kernel {unknown:g}x faster, the TF32 model's figure for a GEMM of unknown "
         f"shape (small GEMMs turn memory-bound at TF32: the "
         f"{fig['tf32'] / fig['fp32']:.1f}x peak ratio is out of reach)"],
        remedy(ctx, "allow TF32 for matmuls where FP32's 23-bit mantissa is not needed: "
                    "torch.backends.cuda.matmul.allow_tf32 = True (or "
                    "torch.set_float32_matmul_precision('high'), which torch.compile "
                    "honours); or run in bf16" + capture_option(ctx, " (--amp bf16)"),
               TF32_TF, TF32_JAX),
        ctx.saving_of(f"gemm_speedup={unknown:g}"),
        f"gemm_speedup={unknown:g}", {"fp32_fma_ns": int(fma_ns), "kernels": n})
