"""compare / amp: kernel differences, MPE, AMP breakdown, tensor-core share."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.conftest import KINETO, shared, shared_parquet
from tests.handmade import step_trace
from traceviz.analyses.compare.amp_breakdown import amp_breakdown
from traceviz.analyses.compare.runs import (
    kernel_diff,
    mean_percentage_error,
    run_figures,
    tensor_core_share,
)
from traceviz.cli import main
from traceviz.parsers import load


def _device_names(path) -> set[str]:
    with gzip.open(path, "rt") as f:
        return {e["name"] for e in json.load(f)["traceEvents"]
                if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}


def test_kernel_diff_on_real_traces_matches_raw_name_sets():
    a_path = shared(KINETO / "a100_diff_control.json.gz")
    b_path = shared(KINETO / "v100_diff_test.json.gz")
    diff = kernel_diff(load(a_path), load(b_path))
    a_names, b_names = _device_names(a_path), _device_names(b_path)
    counts = diff["change"].value_counts()
    assert counts.get("added", 0) == len(b_names - a_names)
    assert counts.get("removed", 0) == len(a_names - b_names)
    assert len(diff) == len(a_names | b_names)
    assert diff["delta_ns"].abs().is_monotonic_decreasing


def test_mean_percentage_error_sign_and_value():
    assert mean_percentage_error([1.0, 2.0], [2.0, 2.0]) == pytest.approx(-25.0)
    assert mean_percentage_error([3.0], [2.0]) == pytest.approx(50.0)
    assert mean_percentage_error([], [1.0]) is None




def test_amp_breakdown_parts_add_up():
    fp32 = run_figures(step_trace([("volta_sgemm_128x64_nn", 600),
                                    ("vectorized_elementwise_kernel", 100)]), "fp32")
    amp = run_figures(step_trace([("volta_h884gemm_128x64_nn", 300),
                                   ("bfloat16_copy_kernel_cuda", 50),
                                   ("vectorized_elementwise_kernel", 100)], amp="fp16"), "amp")
    b = amp_breakdown(fp32, amp)
    assert b.cast_added_ns == 50
    assert b.matrix_saved_ns == 300
    # span per step: the step (1000 ns) both times; waiting = span - busy
    assert b.fp32_span_ns == b.amp_span_ns == 1000
    assert b.idle_change_ns == (1000 - 450) - (1000 - 700)
    assert b.span_delta_ns == pytest.approx(b.cast_added_ns - b.matrix_saved_ns
                                            + b.idle_change_ns + b.other_ns)
    assert fp32.tensor_core_share == 0.0 and amp.tensor_core_share == 1.0


def test_tensor_core_share_on_real_trace():
    t = load(shared(KINETO / "a100_alexnet.json.gz"))
    from traceviz.analyses.work import work_rows

    # FP32 AlexNet on an A100: no half paths; the TF32 tensor-core kernels count
    w = work_rows(t)
    mat = w[w["category"].isin(["gemm", "attention", "rnn"])]
    tf32 = mat[mat["name"].astype(str).str.contains("tf32|tensorop_s1688gemm", case=False)]
    assert len(tf32) > 0
    assert tensor_core_share(w) == pytest.approx(tf32["dur_ns"].sum() / mat["dur_ns"].sum())


def test_compare_and_amp_cli(tmp_path, capsys):
    a = shared_parquet("kineto", "a100_diff_control.json.gz")
    b = shared(KINETO / "v100_diff_test.json.gz")
    assert main(["compare", str(a), str(b), "--plot", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Runs side by side" in out and "Biggest kernel differences" in out
    # neither trace carries timed batches: no MPE table of dashes
    assert "Mean percentage error" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["categories.png", "categories.svg"]
    assert main(["compare", str(a)]) == 2
    assert "at least two" in capsys.readouterr().err


def test_amp_cli(tmp_path, capsys):
    fp32 = step_trace([("volta_sgemm_128x64_nn", 600)])
    amp = step_trace([("volta_h884gemm_128x64_nn", 300), ("bfloat16_copy_kernel_cuda", 50)],
                      amp="fp16")
    fp32.save(tmp_path / "a.parquet")
    amp.save(tmp_path / "b.parquet")
    assert main(["amp", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"),
                 "--plot", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "+ casts added" in out and "50 ns" in out and "300 ns" in out
    assert "− matrix time saved (gemm/attention/rnn)" in out
    assert (tmp_path / "p" / "amp_waterfall.png").exists()
    assert main(["amp", str(tmp_path / "b.parquet"), str(tmp_path / "a.parquet")]) == 2
    assert "give the FP32 run first" in capsys.readouterr().err
