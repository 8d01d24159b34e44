"""One FP32 -> TF32 GEMM model (``opcost.peaks.tf32_speedup``): the roofline time at the
FP32 peak over the roofline time at the TF32 peak, from the GEMM's shapes. The same
GEMMs, recorded eagerly with shapes (fine_torch) and compiled without (compile_full_torch),
get the same prediction; the expected figures are computed here from the raw Kineto JSON
(the mm calls' Input Dims) and the H200's published peaks."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tests.conftest import H200, shared
from traceviz import load
from traceviz.opcost.peaks import TF32_SPEEDUP_UNKNOWN_SHAPE, find, tf32_speedup

# the H200 SXM's dense figures (NVIDIA's datasheet): TFLOP/s, GB/s
FP32, TF32, BW = 66.9, 494.7, 4800.0


def _rules(folder) -> dict:
    from traceviz.analyses.advice.advising import advise

    return {f.rule: f for f in advise(load(folder))[0]}


def _roofline_ratio(m: int, k: int, n: int) -> float:
    flops = 2 * m * k * n
    nbytes = 4 * (m * k + k * n + m * n)  # FP32 operands read, the result written
    at = [max(flops / (p * 1e12), nbytes / (BW * 1e9)) for p in (FP32, TF32)]
    return min(max(at[0] / at[1], 1.0), TF32 / FP32)


def test_the_model_gives_small_gemms_less_than_the_peak_ratio():
    peak = find("NVIDIA H200")
    sizes = [(64, 512, 2048), (128, 256, 1024), (8192, 8192, 8192)]
    got = tf32_speedup(np.array([2 * m * k * n for m, k, n in sizes], float),
                       np.array([4 * (m * k + k * n + m * n) for m, k, n in sizes], float), peak)
    assert got == pytest.approx([_roofline_ratio(*s) for s in sizes])
    assert got[0] < 2.5 and got[-1] == pytest.approx(TF32 / FP32)  # large: compute-bound
    unknown = tf32_speedup(np.array([np.nan]), np.array([0.0]), peak)
    assert unknown[0] == TF32_SPEEDUP_UNKNOWN_SHAPE


def test_eager_and_compiled_runs_of_the_same_gemms_get_one_prediction():
    with gzip.open(shared(H200 / "fine_torch" / "trace.pt.trace.json.gz")) as f:
        events = json.load(f)["traceEvents"]
    dims = {tuple(map(tuple, e["args"]["Input Dims"])) for e in events
            if e.get("name") == "aten::mm" and e.get("args", {}).get("Input Dims")}
    assert dims == {((64, 512), (512, 2048))}  # the LSTM's 64-row input GEMM
    (a, b), = dims
    want = _roofline_ratio(a[0], a[1], b[1])
    eager = _rules(shared(H200 / "fine_torch"))["tf32_off"]
    assert eager.figures["group_speedups"] == [pytest.approx(want, rel=1e-3)]
    assert eager.saving_scenario == f"gemm_speedup={want:.3g}"  # no other matrix kernels
    assert f"{want:.2f}x" in " ".join(eager.evidence)
    # compiled: no shapes recorded, the model's unknown-shape figure; the two agree
    compiled = _rules(shared(H200 / "compile_full_torch"))["tf32_off"]
    assert compiled.saving_scenario == f"gemm_speedup={TF32_SPEEDUP_UNKNOWN_SHAPE:g}"
    assert abs(want - TF32_SPEEDUP_UNKNOWN_SHAPE) < 0.05
