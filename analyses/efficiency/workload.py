"""Run-level efficiency where the ops give no FLOPs: compiled code (torch.compile's graphs,
XLA) records no op shapes, yet the run's work is known, from the workload that was run
(``workload_flops``: bench.json, or the capture's workload). Its achieved TFLOP/s is held
against the peak of the precision its matrix kernels ran in, read from their names; FP32
GEMM kernels on the FP32 FMA units (no TF32) are found by name too. Notes are worded for
the profiler the trace came from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import as_list, categorical_of, per_distinct
from traceviz.algos.patterns import in_word
from traceviz.opcost.matrix import CONV_ARGS, CONV_BACKWARD_PARTS
from traceviz.opcost.peaks import Peak, derived
from traceviz.runners.benchdefs import workload_flops
from traceviz.table.classify import TENSOR_CORE_HALF, TF32_KERNEL
from traceviz.table.names import bounded

if TYPE_CHECKING:
    from traceviz.analyses.efficiency.ops import Efficiency
    from traceviz.trace import Trace

# FP32 GEMM kernels on the FMA units: cuBLAS "ffma" xmma tiles and "sgemm" kernels, CUTLASS
# simt sgemm; not TF32 or half tensor-core tiles (checked apart)
FP32_FMA_GEMM = re.compile(r"ffma|(^|[_\s:])sgemm|simt_sgemm|gemm_f32f32_f32f32", re.IGNORECASE)
# Tensile's "Cijk_\w+?_BB" from the first Cijk_ of a word (linear time: patterns.in_word)
_BF16 = re.compile(r"bf16|bfloat16|(^|_)b\d{3,5}|" + in_word("Cijk_", "+?", "_BB"),
                   re.IGNORECASE)
_FP8 = re.compile(r"e4m3|e5m2|fp8", re.IGNORECASE)
MATRIX = ("gemm", "rnn", "attention")
# the ops whose FLOPs are a direct-convolution count
CONV_OPS = (*CONV_ARGS, *CONV_BACKWARD_PARTS, "aten::convolution_backward")


# FP32 said by the name: the FMA GEMMs above, and FP32 template arguments (cuDNN, Eigen)
_FP32_NAMED = re.compile(FP32_FMA_GEMM.pattern + r"|<float\b|\bf32\b", re.IGNORECASE)


def _precision_of_names(names: pd.Index) -> np.ndarray:
    """Per kernel name, the precision it says (TF32 first: a TF32 tile's name holds f32
    too), or "unknown" where it says none (XLA's ``gemm_fusion_dot`` and Triton kernels)."""
    out = []
    for n in map(bounded, names.astype(str)):  # a name's two ends past LONGEST_NAME
        if TF32_KERNEL.search(n):
            out.append("tf32")
        elif _FP8.search(n):
            out.append("fp8")
        elif TENSOR_CORE_HALF.search(n):
            out.append("bf16" if _BF16.search(n) else "fp16")
        elif _FP32_NAMED.search(n):
            out.append("fp32")
        else:
            out.append("unknown")
    return np.asarray(out, dtype=object)


def matrix_precision(work: pd.DataFrame) -> tuple[str | None, float]:
    """The precision most matrix kernel time ran in, by the names that say one
    (``tf32``, ``fp16``, ``bf16``, ``fp8`` tensor-core tiles, ``fp32``), and the share
    of matrix kernel time whose names say it; ("fp32", 0.0) where no name says (the
    FP32 peak stands), (None, 0.0) without matrix kernels."""
    m = np.flatnonzero(np.isin(work["category"].astype(str).to_numpy(), MATRIX))
    if not len(m):
        return None, 0.0
    prec = per_distinct(_used(work["name"].iloc[m]), _precision_of_names, fill="unknown")
    per = pd.Series(work["dur_ns"].to_numpy()[m], index=prec).groupby(level=0).sum()
    said = per.drop("unknown", errors="ignore")
    if not len(said) or not said.sum():
        return "fp32", 0.0
    return str(said.idxmax()), float(said.sum() / per.sum()) if per.sum() else 1.0


def _used(names: pd.Series) -> pd.Categorical:
    """The names as a Categorical of the names these rows hold: a trace's name column
    has every event's name as a category, and the patterns run once per category."""
    return categorical_of(names).remove_unused_categories()


def fma_gemms(work: pd.DataFrame) -> pd.DataFrame:
    """FP32 GEMM kernels on the FMA units (no tensor cores): one row per name with
    ``kernels`` and ``time_ns``, most time first."""
    gemm = np.flatnonzero((work["category"] == "gemm").to_numpy(bool))
    names = _used(work["name"].iloc[gemm])
    fma = np.asarray(per_distinct(names, lambda u: np.array(
        [bool(FP32_FMA_GEMM.search(str(n))) and not TF32_KERNEL.search(str(n))
         and not TENSOR_CORE_HALF.search(str(n)) for n in u], dtype=bool), fill=False),
        dtype=bool)
    # summed per name code in numpy, not grouped by a text column (a pandas groupby of
    # text costs ~20 ms on a small trace); the rows sorted by name text first, as the
    # groupby left them, so that the sort by time breaks ties as it did
    used, inv = np.unique(names.codes[fma], return_inverse=True)
    time_ns = np.zeros(len(used), dtype=np.int64)
    np.add.at(time_ns, inv, work["dur_ns"].to_numpy(np.int64)[gemm][fma])
    text = np.array([str(n) for n in as_list(names.categories[used])], dtype=object)
    order = np.argsort(text, kind="stable")
    out = pd.DataFrame({"name": pd.array(text[order], dtype="str"),
                        "kernels": np.bincount(inv, minlength=len(used))[order].astype(np.int64),
                        "time_ns": time_ns[order]})
    return out.sort_values("time_ns", ascending=False).reset_index(drop=True)


def shapes_note(trace: Trace) -> str:
    """Why the trace gives no FLOPs per op, and what records them, in its profiler's
    words."""
    fmt = trace.meta.get("source_format")
    if fmt == "xplane":
        return ("The profile holds no XLA cost analysis for its GPU kernels (no flops or "
                "bytes_accessed stats): no FLOPs or bytes per op.")
    if fmt == "nsys":
        return ("No op shapes in the trace (nsys --pytorch=autograd-shapes-nvtx records "
                "them for PyTorch): no FLOPs or bytes per op.")
    if fmt == "mxnet":
        return "The MXNet profiler records no op shapes: no FLOPs or bytes per op."
    # per distinct name, not per row (the text of every row's name costs ~0.1 s on a
    # small trace)
    compiled = per_distinct(trace.events["name"], lambda u: np.array(
        [str(n).startswith("Torch-Compiled Region") for n in as_list(u)], dtype=bool),
        fill=False)
    if compiled.any():
        return ("No op shapes for the compiled region (torch.compile runs its graph as "
                "one op; record_shapes=True gives the shapes of eager ops only): no FLOPs "
                "or bytes per op.")
    return ("No op shapes in the trace (torch.profiler record_shapes=True): no FLOPs or "
            "bytes per op.")


def apply_workload_flops(eff: Efficiency, trace: Trace, work: pd.DataFrame) -> None:
    """Where ops gave FLOPs for less than half of the matrix kernel time (compiled code,
    no shapes), the run's own: the workload's FLOPs per batch times the profiled steps,
    held against the peak of the precision its matrix kernels ran in."""
    model = eff.model or {}
    per_batch = model.get("model_flops_per_batch")
    if not per_batch or not eff.steps:
        return
    matrix = np.isin(work["category"].astype(str).to_numpy(), MATRIX)
    k = eff.kernels
    covered = float(k.loc[k["category"].isin(MATRIX), "time_ns"].sum()) if len(k) else 0.0
    if eff.flops and covered >= 0.5 * float(work["dur_ns"].to_numpy()[matrix].sum()):
        return
    eff.flops = int(per_batch) * eff.steps
    eff.flops_from = "workload"
    precision, said = matrix_precision(work)
    if eff.peak is not None and precision is not None and eff.run_key is None:
        key = precision if precision in eff.peak.figures else "fp32"
        if key in eff.peak.figures:
            eff.run_key = key
            median = model.get("model_tflops")
            model["mfu"] = median / eff.peak.figures[key] if median is not None else None
    eff.notes.append(
        f"FLOPs are the workload's ({per_batch / 1e9:,.2f} GFLOP per batch x "
        f"{eff.steps} profiled steps), not per op: the rates are the run's"
        + _ran(precision, said) + ".")
    _serial_floor(eff, work, int(per_batch), model)


def _ran(precision: str | None, said: float) -> str:
    """What the note says of the matrix kernels' precision, and how much of their time
    the names that say it cover."""
    if precision is None:
        return ""
    if not said:
        return (", held against the FP32 peak: its matrix kernels' names do not say their "
                "precision")
    if said >= 0.995:
        return f", its matrix kernels ran {precision.upper()}"
    return (f", its matrix kernels ran {precision.upper()} by the names that say a "
            f"precision ({said:.0%} of matrix kernel time; the others', e.g. XLA's "
            "gemm_fusion kernels, do not)")


def _serial_floor(eff: Efficiency, work: pd.DataFrame, per_batch: int, model: dict) -> None:
    """The serial-chain floor: a stream runs its kernels one after the other, so a step
    takes at least its busiest stream's kernel time, back to back (the median step's);
    the workload's rate there."""
    from traceviz.units import fmt_ns

    k = work[(work["step"].to_numpy() >= 0)]
    if not len(k):
        return
    per_stream = k.groupby(["step", "device", "stream"], observed=True)["dur_ns"].sum()
    floor = float(per_stream.groupby(level="step").max().median())
    if floor <= 0:
        return
    model["serial_floor_ns"] = floor
    model["floor_tflops"] = per_batch / floor / 1e3
    peak = eff.run_peak
    eff.notes.append(
        f"Serial-chain floor: a step's busiest stream runs {fmt_ns(floor)} of kernels, back "
        f"to back at best; at that floor the workload runs at "
        f"{model['floor_tflops']:,.1f} TFLOP/s"
        + (f", {model['floor_tflops'] / peak:.0%} of the {eff.run_key} peak" if peak else "")
        + ".")


def fma_note(eff: Efficiency, work: pd.DataFrame) -> None:
    """FP32 GEMM kernels on the FMA units where the device has TF32 tensor cores."""
    if eff.peak is None or "tf32" not in eff.peak.figures:
        return
    f = fma_gemms(work)
    total = float(work["dur_ns"].sum())
    if not len(f) or not total or f["time_ns"].sum() < 0.10 * total:
        return
    n = int(f["kernels"].sum())
    per = f" ({n / eff.steps:,.0f} per step)" if eff.steps else ""
    eff.notes.append(
        f"{n:,} FP32 GEMM kernels{per} ran on the FP32 FMA units, no TF32: "
        f"{f['time_ns'].sum() / total:.0%} of kernel time against the "
        f"{eff.peak.figures['fp32']:g} TFLOP/s FP32 peak, where TF32 tensor cores give "
        f"{eff.peak.figures['tf32']:g}.")


def over_peak_notes(groups: pd.DataFrame, peak: Peak | None, over: float) -> list[str]:
    """Op groups achieving more than ``over`` x a peak. Above the memory bandwidth only:
    their data came from the caches (tensors that fit in L2, re-read), which serve it
    faster than HBM; the peak table is right. A convolution above a compute peak: its
    FLOPs are the direct-convolution count, and cuDNN's Winograd and FFT algorithms do
    fewer multiplications than that; the table is right. Any other op above a compute
    peak: the table's figures are below this device's."""
    if not len(groups):
        return []
    flops = groups["pct_peak"].to_numpy(float)
    bw = groups["pct_bw"].to_numpy(float)
    notes = []
    conv = groups["op"].isin(CONV_OPS).to_numpy()
    fast = [f"{op} {100 * x:.0f}%" for op, x, c in zip(groups["op"], flops, conv, strict=True)
            if x > over and c]
    if fast:
        notes.append(f"Convolutions above the compute peak ({', '.join(fast[:3])}): their "
                     "FLOPs are the direct-convolution count (2 x N x C_out x H_out x W_out "
                     "x C_in/groups x K_h x K_w), and cuDNN's Winograd and FFT algorithms "
                     "do fewer multiplications than that (Winograd F(4x4, 3x3): a quarter); "
                     "the rate is the direct count's equivalent, the peak figures are "
                     "right.")
    compute = [f"{op} {100 * x:.0f}%" for op, x, c in zip(groups["op"], flops, conv,
                                                           strict=True) if x > over and not c]
    if compute:
        notes.append(f"Achieved above the compute peak ({', '.join(compute[:3])}): the peak "
                     f"figures ({peak.device if peak else '?'}) are below this device's; "
                     "check --peak.")
    cached = [f"{op} {100 * x:.0f}%" for op, x, f in zip(groups["op"], bw, flops, strict=True)
              if x > over and not f > over]
    if cached:
        of = f" of {peak.bandwidth:g} GB/s" if peak and peak.bandwidth else ""
        notes.append(f"Above the memory bandwidth ({', '.join(cached[:3])}{of}): their "
                     "data was served from "
                     "the caches (tensors small enough for L2, read again), faster than "
                     "HBM; the bandwidth figure is right, the bytes counted are the op's, "
                     "not what reached memory.")
    return notes


def stated_peak(trace: Trace, device: str | None) -> Peak | None:
    """The peak of a device the peak table lacks, derived from what the profile states
    about it (``meta["device_properties"]``, by the device's index: an XSpace GPU plane's
    multiprocessors, clock, compute capability and memory bandwidth; Kineto's
    ``deviceProperties``): FP32 on its CUDA cores and the stated bandwidth
    (``peaks.derived``); bandwidth alone on an AMD device (its gfx version fills the
    compute-capability fields)."""
    props = trace.meta.get("device_properties") or {}
    devices = trace.meta.get("devices") or {}
    if not isinstance(props, dict) or not isinstance(devices, dict):
        return None
    index = next((k for k, v in devices.items() if v == device), None)
    p = props.get(index) if index is not None else None
    if not isinstance(p, dict):
        return None
    if _rocm(trace, str(device)):
        p = {"memory_bandwidth_gbps": p.get("memory_bandwidth_gbps")}
    return derived(str(device), p)


def _rocm(trace: Trace, device: str) -> bool:
    """A ROCm profile: HIP launch calls, or an AMD device name."""
    apis = trace.events["launch_api"]
    names = apis.cat.categories if isinstance(apis.dtype, pd.CategoricalDtype) \
        else apis.dropna().unique()
    return any(str(a).startswith("hip") for a in names) or bool(
        re.search(r"\bAMD\b|Instinct|Radeon|gfx\d", device, re.IGNORECASE))


def model_figures(meta: Mapping[str, Any], run_peak: float | None) -> dict[str, Any] | None:
    """A capture's workload FLOPs per batch (bench.json, else from its workload), the
    model TFLOP/s at the median timed batch and the MFU against ``run_peak``."""
    bench = meta.get("bench") or {}
    flops = bench.get("workload_flops")
    if flops is None and isinstance(meta.get("workload"), dict):
        try:
            flops = workload_flops(meta["workload"])["total"]
        except (KeyError, TypeError, ValueError):
            flops = None
    median = (bench.get("time_per_batch_s") or {}).get("median")
    if not flops:
        return None
    tflops = flops / median / 1e12 if median else None
    return {"model_flops_per_batch": int(flops), "model_tflops": tflops,
            "mfu": tflops / run_peak if tflops is not None and run_peak else None}
