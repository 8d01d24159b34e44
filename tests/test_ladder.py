"""`traceviz ladder`: the study's figures read as the study gives them, a ladder folder read
back (the real H200 run folders of ../shared/gpu-h200, and repeats), and a tiny real CPU
ladder; every expected figure recomputed here from the rungs' bench.json."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

from tests.conftest import H200, needs, shared
from traceviz.cli import main
from traceviz.ladder.rungs import BY_NAME, RUNGS, factorized_gemm_speedup, ladder_workload
from traceviz.runners import VARIANTS
from traceviz.runners.presets import PRESETS

TINY = ["--device", "cpu", "--batch", "4", "--seq", "5", "--hidden", "16", "--layers", "2",
        "--warmup", "1", "--steps", "3", "--profile-steps", "1"]


def _json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _median(run_dir: Path) -> float:
    return json.loads((run_dir / "bench.json").read_text())["time_per_batch_s"]["median"]


def test_rungs_are_registered_variants_and_chain_down():
    names = [r.variant for r in RUNGS]
    assert all(n in VARIANTS for n in names) and names[0] == "naive8_torch"
    assert all(r.below in names[:i] for i, r in enumerate(RUNGS) if r.below)
    assert [r.variant for r in RUNGS if r.reference] == ["cudnn_torch"]


def test_the_study_figures_are_cumulative_over_the_baseline_and_alone():
    """The study: alone over its baseline 2, 1.82, 1.2, 1.063, 1.30; together 1+2 = 3.74,
    +3 = 6.21, +4 = 6.55, +5 = 7.98. Each rung adds its optimization to the ones below,
    so only combined GEMMs (over the baseline itself) compare with an individual figure."""
    ladder = ["fine_torch", "streams_torch", "fused_torch", "transposed_torch",
              "wavefront_torch"]
    assert [BY_NAME[n].cumulative for n in ladder] == [2.0, 3.74, 6.21, 6.55, 7.98]
    assert [BY_NAME[n].alone for n in ladder] == [2.0, 1.82, 1.2, 1.063, 1.30]
    assert [n for n in ladder if BY_NAME[n].alone_comparable] == ["fine_torch"]
    assert BY_NAME["fine_torch"].alone_over == "naive8_torch"
    # each cumulative figure is the one below it times about this optimization's gain
    cum = [1.0] + [BY_NAME[n].cumulative for n in ladder]
    assert all(b > a for a, b in zip(cum, cum[1:], strict=False))


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


@pytest.mark.parametrize("argv, message", [
    (["--rungs", "lstm_torch"], "--rungs: 'lstm_torch' is no rung"),
    (["--modes", "graph"], "--modes: graph: the graph-replayed mode captures each forward "
                           "pass in a CUDA graph and needs --device cuda"),
    (["--modes", "eager,compiled"], "--modes: 'compiled' is no mode"),
    (["--repeat", "0"], "--repeat: is at least 1"),
])
def test_usage_errors_are_one_line(argv, message, capsys, tmp_path):
    assert main(["ladder", *argv, *TINY, "--out", str(tmp_path / "l")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "l").exists()  # refused before anything ran


def test_from_the_h200_folder(capsys):
    """The H200 ladder, read back from its run folders (raw traces, no trace.parquet)."""
    doc = _json(capsys, "ladder", "--from", str(shared(H200)), "--json")
    rungs = {r["rung"]["variant"]: r for r in doc["rungs"]}
    assert list(rungs) == ["naive8_torch", "fine_torch", "streams_torch", "fused_torch",
                           "transposed_torch", "wavefront_torch", "factorized_torch",
                           "compile_full_torch"]  # no cudnn_torch at this shape there
    assert doc["modes"] == ["eager"] and doc["repeats"] == 1
    assert (doc["workload"]["layers"], doc["workload"]["hidden"], doc["workload"]["seq"],
            doc["workload"]["batch"]) == (4, 512, 100, 64)
    base = _median(shared(H200 / "naive8_torch"))
    for name, r in rungs.items():
        eager = r["modes"]["eager"]
        assert eager["median_s"] == _median(shared(H200 / name))
        assert eager["x_over_baseline"] == pytest.approx(base / _median(H200 / name))
        assert eager["spread_s"] is None and eager["resolved"] is None
    fine = rungs["fine_torch"]
    assert fine["rung"]["cumulative"] == 2.0 and fine["rung"]["alone_comparable"]
    assert fine["modes"]["eager"]["x_alone"] == pytest.approx(base / _median(H200 / "fine_torch"))
    assert rungs["wavefront_torch"]["rung"]["cumulative"] == 7.98
    assert rungs["wavefront_torch"]["modes"]["eager"]["x_alone"] is None
    # compile_full_torch: its first call beside the compile time it reports
    bench = json.loads(shared(H200 / "compile_full_torch" / "bench.json").read_text())
    assert rungs["compile_full_torch"]["modes"]["eager"]["first_call_s"] == \
        bench["first_call_s"]
    # predictions: the rung's scenario on the rung below's trace, error against measured
    p = rungs["factorized_torch"]["prediction"]
    assert p["on"] == "fused_torch" and p["scenario"] == "gemm_speedup=5.33"
    assert p["eager_error"] == pytest.approx(
        p["eager_step_s"] / _median(shared(H200 / "factorized_torch")) - 1)
    assert rungs["transposed_torch"]["prediction"]["note"] == \
        "no whatif scenario changes a weight's layout"
    assert rungs["fine_torch"]["prediction"]["scenario"] == "merge_gemms"
    assert rungs["fused_torch"]["prediction"]["scenario"] == \
        "fuse_pointwise+batch_input_gemms+drop_stream_sync"
    assert rungs["fused_torch"]["prediction"]["on"] == "streams_torch"
    # the table: the study's cumulative figure beside the measured one
    assert main(["ladder", "--from", str(H200), "--width", "220"]) == 0
    text = capsys.readouterr().out
    assert "cumulative" in text and "3.74x" in text and "7.98x" in text


def test_from_the_h200_folder_with_graph_predictions(capsys):
    """Asked for the graph mode too: each rung's scenario with +cuda_graphs on the rung
    below's trace, the same figure whatif gives; no graph-replayed run to compare with."""
    import traceviz
    from traceviz.analyses.whatif.engine import whatif

    doc = _json(capsys, "ladder", "--from", str(shared(H200)), "--rungs", "fine_torch", "--modes",
                "eager,graph", "--json")
    assert doc["modes"] == ["eager", "graph"]
    fine = doc["rungs"][1]
    assert fine["modes"]["graph"]["error"] == "not captured"
    trace = traceviz.load(shared(H200 / "naive8_torch"))
    eager, graph = whatif(trace, ("merge_gemms", "merge_gemms+cuda_graphs")).scenarios
    p = fine["prediction"]
    assert p["eager_step_s"] == pytest.approx(eager.timed_step_ns / 1e9)
    assert p["graph_step_s"] == pytest.approx(graph.timed_step_ns / 1e9)
    assert p["graph_step_s"] < p["eager_step_s"] and p["graph_error"] is None
    assert p["eager_error"] == pytest.approx(p["eager_step_s"] / _median(H200 / "fine_torch")
                                             - 1)


def _fake_run(d: Path, model: str, medians: float, graph: bool = False) -> None:
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({
        "model": model, "device": "cuda", "graph_replay": graph,
        "workload": {"layers": 4, "hidden": 512, "seq": 100, "batch": 64,
                     "mode": "forward"}}))
    (d / "bench.json").write_text(json.dumps({
        "time_per_batch_s": {"median": medians, "min": medians * 0.9, "max": medians * 1.2,
                             "cv": 0.01, "noisy": False},
        "first_call_s": 0.5, "framework_compile_s": None,
        "timing": "cuda_events" if graph else "wall"}))


def test_repeats_give_the_median_of_medians_and_their_spread(tmp_path, capsys):
    """Three repeats: the median of the medians, their spread, a step smaller than the
    spread marked as not resolved (graph mode read from the -graph folders)."""
    eager = {"naive8_torch": [0.150, 0.160, 0.140], "fine_torch": [0.080, 0.060, 0.070],
             "streams_torch": [0.065, 0.060, 0.072]}
    graph = {"naive8_torch": [0.0375, 0.0374, 0.0377], "fine_torch": [0.0179, 0.0178, 0.018]}
    for k in range(3):
        for name, ms in eager.items():
            _fake_run(tmp_path / f"repeat-{k + 1}" / name, name, ms[k])
        for name, ms in graph.items():
            _fake_run(tmp_path / f"repeat-{k + 1}" / f"{name}-graph", name, ms[k], True)
    doc = _json(capsys, "ladder", "--from", str(tmp_path), "--json")
    assert doc["repeats"] == 3 and doc["modes"] == ["eager", "graph"]
    rungs = {r["rung"]["variant"]: r for r in doc["rungs"]}
    for mode, table in (("eager", eager), ("graph", graph)):
        for name, ms in table.items():
            t = rungs[name]["modes"][mode]
            assert t["medians_s"] == ms and t["median_s"] == statistics.median(ms)
            assert t["spread_s"] == pytest.approx(max(ms) - min(ms))
            assert t["x_over_baseline"] == pytest.approx(
                statistics.median(table["naive8_torch"]) / statistics.median(ms))
    assert rungs["fine_torch"]["modes"]["eager"]["resolved"] is True    # 150 -> 70 ms
    assert rungs["streams_torch"]["modes"]["eager"]["resolved"] is False  # 70 -> 65 ± 20
    assert rungs["fine_torch"]["modes"]["graph"]["timing"] == "cuda_events"
    assert rungs["streams_torch"]["modes"]["graph"]["median_s"] is None
    # no trace to replay: a reason, not a figure
    assert rungs["fine_torch"]["prediction"]["note"] == (
        f"no naive8_torch trace to replay ({tmp_path / 'repeat-3' / 'naive8_torch'}: no "
        "trace files in this folder (expected a capture's run folder, a folder of rank "
        "traces named *.json, *.json.gz, *.sqlite, *.parquet..., an nsys table folder or a "
        "TensorBoard log directory))")
    assert main(["ladder", "--from", str(tmp_path), "--width", "200"]) == 0
    text = capsys.readouterr().out
    assert "150.00 ms" in text and "20.00 ms" in text  # naive8: 140, 150, 160 ms
    assert "2.31x ?" in text  # streams: 150 / 65 ms, and 70 -> 65 ms is within the spread


@pytest.mark.parametrize("argv, message", [
    (["--from", "{tmp}/none"], "not a folder"),
    (["--from", "{tmp}"], "no rung folders here"),
    (["--from", "{tmp}", "--repeat", "2"], "--from: --from re-renders a ladder folder; "
                                           "--repeat is for a capture"),
])
def test_from_bad_folders_are_one_line(argv, message, tmp_path, capsys):
    assert main(["ladder", *[a.format(tmp=tmp_path) for a in argv]]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_from_a_rung_with_a_damaged_bench_is_one_line(tmp_path, capsys):
    shutil.copytree(shared(H200 / "fused_torch"), tmp_path / "naive8_torch")
    (tmp_path / "naive8_torch" / "bench.json").write_text("{not json")
    assert main(["ladder", "--from", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "bench.json: not readable as the run's JSON record" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.capture
def test_a_tiny_cpu_ladder_with_repeats(tmp_path, capsys):
    needs("torch")
    from traceviz.analyses.whatif.engine import whatif
    from traceviz.trace import Trace

    out = tmp_path / "ladder"
    doc = _json(capsys, "ladder", "--rungs", "fused_torch,factorized_torch", *TINY,
                "--repeat", "2", "--out", str(out), "--json")
    rungs = {r["rung"]["variant"]: r for r in doc["rungs"]}
    assert list(rungs) == ["naive8_torch", "fused_torch", "factorized_torch"]
    assert doc["repeats"] == 2 and doc["modes"] == ["eager"]
    # interleaved: the whole ladder once, then again (A B C A B C)
    order = sorted((out / f"repeat-{k}" / n / "bench.json").stat().st_mtime_ns
                   for k in (1, 2) for n in rungs)
    assert order == [(out / f"repeat-{k}" / n / "bench.json").stat().st_mtime_ns
                     for k in (1, 2) for n in rungs]
    base = statistics.median(_median(out / f"repeat-{k}" / "naive8_torch") for k in (1, 2))
    for name, r in rungs.items():
        ms = [_median(out / f"repeat-{k}" / name) for k in (1, 2)]
        t = r["modes"]["eager"]
        assert t["medians_s"] == ms and t["median_s"] == statistics.median(ms)
        assert t["spread_s"] == pytest.approx(max(ms) - min(ms))
        assert t["x_over_baseline"] == pytest.approx(base / statistics.median(ms))
    # the factorized LSTM's FLOPs per batch (rank 16 // 4 = 4): 2 T B (r (I_l + H) + 4H r)
    fact = json.loads((out / "repeat-1" / "factorized_torch" / "bench.json").read_text())
    assert fact["workload_flops"] == sum(2 * 5 * 4 * (4 * (16 + 16) + 4 * 16 * 4)
                                         for _ in range(2))
    # whatif on a CPU trace: the factorization as a GEMM speed-up on fused_torch's trace
    x = factorized_gemm_speedup(ladder_workload("cpu", False, batch=4, seq=5, hidden=16,
                                                layers=2)[0])
    s = whatif(Trace.load(out / "repeat-2" / "fused_torch" / "trace.parquet"),
               (f"gemm_speedup={x:.3g}",)).scenarios[0]
    p = rungs["factorized_torch"]["prediction"]
    assert s.timed_step_ns is not None
    assert p["eager_step_s"] == pytest.approx(s.timed_step_ns / 1e9)
    assert p["eager_x"] == pytest.approx(base / (s.timed_step_ns / 1e9))
    # re-rendered from the folder: the same figures
    again = _json(capsys, "ladder", "--from", str(out), "--json")
    assert [r["modes"] for r in again["rungs"]] == [r["modes"] for r in doc["rungs"]]
    assert again["rungs"][2]["prediction"]["eager_step_s"] == pytest.approx(p["eager_step_s"])


def test_a_used_out_folder_is_kept_without_force(tmp_path, capsys):
    out = tmp_path / "ladder"
    (out / "naive8_torch").mkdir(parents=True)
    (out / "naive8_torch" / "bench.json").write_text("{}")
    (out / ".traceviz-run").write_text("")  # an earlier ladder's: traceviz made it
    assert main(["ladder", "--rungs", "fused_torch", *TINY, "--out", str(out)]) == 2
    assert "folder is not empty (use --force" in capsys.readouterr().err
    assert (out / "naive8_torch" / "bench.json").read_text() == "{}"


def test_from_a_folder_with_a_truncated_trace_says_why_there_is_no_prediction(tmp_path,
                                                                              capsys):
    for name in ("naive8_torch", "fine_torch"):
        shutil.copytree(shared(H200 / name), tmp_path / name)
    raw = tmp_path / "naive8_torch" / "trace.pt.trace.json.gz"
    raw.write_bytes(raw.read_bytes()[:5000])
    doc = _json(capsys, "ladder", "--from", str(tmp_path), "--json")
    fine = doc["rungs"][1]
    assert fine["modes"]["eager"]["median_s"] == _median(shared(H200 / "fine_torch"))
    assert fine["prediction"]["eager_step_s"] is None
    assert fine["prediction"]["note"].startswith("no naive8_torch trace to replay (")
    assert "truncated gzip file" in fine["prediction"]["note"]
