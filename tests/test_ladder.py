"""`traceviz ladder`: a tiny real CPU ladder; its speed-ups recomputed from each rung's
bench.json, whatif's prediction from the base rung's trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import needs
from traceviz.cli import main
from traceviz.ladder import RUNGS, factorized_gemm_speedup, ladder_workload
from traceviz.runners import VARIANTS
from traceviz.runners.presets import PRESETS

TINY = ["--device", "cpu", "--batch", "4", "--seq", "5", "--hidden", "16", "--layers", "2",
        "--warmup", "1", "--steps", "3", "--profile-steps", "1"]


def test_rungs_are_registered_variants_and_chain_down():
    names = [r.variant for r in RUNGS]
    assert all(n in VARIANTS for n in names) and names[0] == "naive8_torch"
    assert all(r.base in names[:i] for i, r in enumerate(RUNGS) if r.base)


def test_the_study_shape_and_the_cpu_scale():
    full, _ = ladder_workload("cpu", full=True)
    study = PRESETS["seq100"]
    assert (full.layers, full.seq, full.hidden, full.batch, full.mode) == \
        (study.layers, study.seq, study.hidden, study.batch, "forward") == (4, 100, 512, 64,
                                                                             "forward")
    small, notes = ladder_workload("cpu", full=False)
    assert small.seq < 100 and small.batch < 64 and notes


def test_factorized_gemm_speedup():
    w, _ = ladder_workload("cpu", full=True)  # input = hidden = 512, 4 layers, r = 128
    h, r = 512, 128
    assert factorized_gemm_speedup(w) == pytest.approx(4 * h * 2 * h / (r * 2 * h + 4 * h * r))


def test_an_unknown_rung_is_a_usage_error(capsys):
    assert main(["ladder", "--rungs", "cudnn_torch", *TINY]) == 2
    assert "--rungs: 'cudnn_torch' is no rung" in capsys.readouterr().err


@pytest.mark.capture
def test_a_tiny_cpu_ladder(tmp_path, capsys):
    needs("torch")
    from traceviz.analyses.whatif import whatif
    from traceviz.trace import Trace

    out = tmp_path / "ladder"
    assert main(["ladder", "--rungs", "streams_torch,fused_torch,factorized_torch", *TINY,
                 "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rungs = {r["rung"]["variant"]: r for r in doc["rungs"]}
    assert list(rungs) == ["naive8_torch", "streams_torch", "fused_torch", "factorized_torch"]

    def median(name: str) -> float:
        bench = json.loads((Path(rungs[name]["run_dir"]) / "bench.json").read_text())
        return bench["time_per_batch_s"]["median"]

    base = median("naive8_torch")
    for name, r in rungs.items():
        assert r["median_s"] == median(name)
        assert r["speedup"] == pytest.approx(base / median(name))
    # the factorized LSTM's FLOPs per batch (rank 16 // 4 = 4): 2 T B (r (I_l + H) + 4H r)
    fact = json.loads((out / "factorized_torch" / "bench.json").read_text())
    assert fact["workload_flops"] == sum(2 * 5 * 4 * (4 * (16 + 16) + 4 * 16 * 4)
                                         for _ in range(2))
    assert fact["workload_flops"] < json.loads(
        (out / "fused_torch" / "bench.json").read_text())["workload_flops"]
    assert rungs["factorized_torch"]["step"] == pytest.approx(
        median("fused_torch") / median("factorized_torch"))
    # whatif on a CPU trace: no fusion model (a reason), a GEMM speed-up for factorized
    assert rungs["fused_torch"]["predicted"] is None
    assert "CPU trace" in rungs["fused_torch"]["prediction_note"]
    x = factorized_gemm_speedup(ladder_workload("cpu", False, batch=4, seq=5, hidden=16,
                                                layers=2)[0])
    s = whatif(Trace.load(out / "fused_torch" / "trace.parquet"),
               (f"gemm_speedup={x:.3g}",)).scenarios[0]
    # in timed time: the baseline's timed step over the scenario's predicted timed step
    assert s.timed_step_ns is not None
    want = median("naive8_torch") * 1e9 / s.timed_step_ns
    assert rungs["factorized_torch"]["predicted"] == pytest.approx(want)
    assert "ms per timed step" in rungs["factorized_torch"]["prediction_note"]
    # the table form: each rung and the study's figure beside it
    assert main(["ladder", "--rungs", "fused_torch", *TINY, "--out", str(tmp_path / "t"),
                 "--width", "160"]) == 0
    text = capsys.readouterr().out
    assert "naive8_torch" in text and "fused_torch" in text and "1.2x" in text


def test_a_used_out_folder_is_kept_without_force(tmp_path, capsys):
    out = tmp_path / "ladder"
    (out / "naive8_torch").mkdir(parents=True)
    (out / "naive8_torch" / "bench.json").write_text("{}")
    assert main(["ladder", "--rungs", "fused_torch", *TINY, "--out", str(out)]) == 2
    assert "folder is not empty (use --force" in capsys.readouterr().err
    assert (out / "naive8_torch" / "bench.json").read_text() == "{}"
