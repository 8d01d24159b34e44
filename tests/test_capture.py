"""Real tiny captures through `traceviz capture`, each in its own runner subprocess."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.conftest import needs

needs("torch")

import traceviz  # noqa: E402
from traceviz import Trace  # noqa: E402
from traceviz.analyses import summarize  # noqa: E402
from traceviz.cli import main  # noqa: E402
from traceviz.runners import VARIANTS, benchdefs, variants  # noqa: E402

TINY = ["--preset", "ptb_lm", "--batch", "4", "--seq", "5", "--hidden", "16", "--layers", "2",
        "--vocab", "50", "--embed", "8", "--warmup", "1", "--steps", "3",
        "--profile-steps", "2", "--device", "cpu"]
# every PyTorch variant that runs on a CPU, from the registry; compile_torch and
# compile_full_torch work the same way and are left out here for their ~20 s of
# compilation (test_compile_time_is_recorded captures one)
COMPILED = ("compile_torch", "compile_full_torch")
FAST_VARIANTS = [v.name for v in variants("torch", "cpu") if v.name not in COMPILED]


def _capture(tmp_path, *args: str) -> tuple[int, Trace | None, dict]:
    out = tmp_path / "run"
    code = main(["capture", *args, *TINY, "--out", str(out)])
    if code != 0:
        return code, None, {}
    return code, Trace.load(out / "trace.parquet"), json.loads((out / "bench.json").read_text())


def _raw_events(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


@pytest.mark.capture
@pytest.mark.parametrize("model", FAST_VARIANTS)
def test_capture_forward(tmp_path, model, capsys):
    code, trace, bench = _capture(tmp_path, "--model", model, "--mode", "forward")
    assert code == 0, capsys.readouterr().err
    run = tmp_path / "run"
    assert {p.name for p in run.iterdir()} >= {"trace.pt.trace.json.gz", "trace.parquet",
                                              "bench.json", "meta.json", "config.json",
                                              "runner.log"}
    raw = _raw_events(run / "trace.pt.trace.json.gz")
    steps = {e["name"] for e in raw if e.get("name", "").startswith("ProfilerStep#")}
    assert len(steps) == 2
    assert trace.meta["model"] == model and trace.meta["mode"] == "forward"
    assert trace.meta["workload"]["batch"] == 4 and trace.meta["runner"]["framework"] == "torch"
    assert bench["batches"] == 3
    assert bench["sequences_per_s"] == pytest.approx(4 / bench["time_per_batch_s"]["median"])
    assert bench["profiler_overhead"] > 0
    # warm-up: at least --warmup 1, more until three batches agree, at most 15
    warm = bench["warmup_times_s"]
    assert bench["warmup_batches"] == len(warm) and 1 <= len(warm) <= 15
    assert bench["warmup_settled"] == benchdefs.settled(warm) or len(warm) == 15
    spread = benchdefs.spread(bench["batch_times_s"])
    assert bench["noisy"] == spread["noisy"] == bench["time_per_batch_s"]["noisy"]
    # first call: the warm-up batches' time above the timed median
    assert bench["first_call_s"] == pytest.approx(
        sum(max(0.0, w - spread["median"]) for w in warm))
    # one loss per timed batch; one fixed batch, no update: the same loss every time
    losses = bench["loss_per_batch"]
    assert len(losses) == 3 and len(set(losses)) == 1 and losses[0] > 0
    assert bench["loss_first_batch"] == len(warm)
    u = bench["utilization"]
    # the probe runs around the timed batches (a few ms here: too short for a CPU % bound,
    # the kernel updates other threads' CPU time in bursts; test_usage.py checks it)
    assert u["wall_s"] >= bench["elapsed_s"] and u["cpu_percent"] >= 0
    assert u["energy_j"] is not None or any("energy absent" in n for n in u["notes"])
    s = summarize(trace)
    assert s.cpu_trace and s.steps == 2 and s.kernel_count > 0
    names = set(trace.events["name"].astype(str))
    assert "forward" in names and "backward" not in names
    out = capsys.readouterr().out
    assert "Top CPU ops" in out and "sequences/s" in out and "next:" in out


@pytest.mark.capture
def test_compile_time_is_recorded(tmp_path, capsys):
    code, _, bench = _capture(tmp_path, "--model", "compile_full_torch", "--mode", "forward",
                              "--compile-mode", "default")
    assert code == 0, capsys.readouterr().err
    assert bench["framework_compile_s"] > 0 and "compile_inner" in \
        bench["framework_compile_note"]
    # compiling happens in the first call: it is in the warm-up's excess too
    assert bench["first_call_s"] >= 0.5 * bench["framework_compile_s"]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["options"] == \
        {"compile_mode": "default"}


def test_variant_options_belong_to_their_variants(tmp_path, capsys):
    assert main(["capture", "--model", "fused_torch", "--rank", "2", *TINY,
                 "--out", str(tmp_path / "r")]) == 2
    assert "--rank: applies to factorized_torch" in capsys.readouterr().err
    assert main(["capture", "--model", "factorized_torch", "--rank", "0", *TINY,
                 "--out", str(tmp_path / "r")]) == 2
    assert "--rank: must be a positive integer" in capsys.readouterr().err


@pytest.mark.capture
def test_capture_train_has_phases_and_gemm(tmp_path, capsys):
    code, trace, bench = _capture(tmp_path, "--model", "fine_torch", "--mode", "train")
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["analyze", str(tmp_path / "run"), "--json"]) == 0  # a run folder
    assert json.loads(capsys.readouterr().out)["kernels"]["count"] == summarize(trace).kernel_count
    names = set(trace.events["name"].astype(str))
    assert {"forward", "backward", "optimizer"} <= names
    # the notebook API on a real CPU capture: leaf ops per phase add up to analyze's count
    t = traceviz.load(tmp_path / "run")
    phases = t.phases().set_index("phase")
    assert {"forward", "backward", "optimizer"} <= set(phases.index)
    assert phases["kernels"].sum() == len(t.kernels()) == summarize(trace).kernel_count
    assert phases.loc["backward", "kernels"] > phases.loc["optimizer", "kernels"] > 0
    ops = t.ops()
    assert ops["self_ns"].sum() == ops.loc[ops["depth"] == 0, "dur_ns"].sum()
    assert ops["is_work"].sum() == len(t.kernels())
    cats = summarize(trace).categories.set_index("category")
    assert cats.loc["gemm", "count"] > 0 and cats.loc["elementwise", "count"] > 0
    # training moves the loss; compare shows the timed phase's CPU % and first call
    assert bench["loss_per_batch"][0] != bench["loss_per_batch"][-1]
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "run"), str(tmp_path / "run"), "--width", "160"]) == 0
    out = capsys.readouterr().out
    assert f"{bench['utilization']['cpu_percent']:.0f}%" in out
    assert f"{bench['first_call_s']:.3f} s" in out


@pytest.mark.capture
def test_capture_amp_bf16_shows_casts(tmp_path, capsys):
    code, trace, _ = _capture(tmp_path, "--model", "fine_torch", "--mode", "forward",
                              "--amp", "bf16")
    assert code == 0, capsys.readouterr().err
    raw = _raw_events(tmp_path / "run" / "trace.pt.trace.json.gz")
    # the runner records dtypes: a cast op is an _to_copy between floating-point formats
    floats = {5: "c10::Half", 6: "float", 7: "double", 15: "c10::BFloat16"}
    to_copy = [e for e in raw if e.get("name") == "aten::_to_copy"]
    casts = [e for e in to_copy
             if e["args"]["Input type"][0] in floats.values()
             and floats.get(int(e["args"]["Concrete Inputs"][1] or -1)) not in (
                 None, e["args"]["Input type"][0])]
    s = summarize(trace)
    assert trace.meta["dtypes_recorded"] is True
    assert s.casts.cast_ops == len(casts) > 0
    assert s.casts.count > 0 and s.casts.total_ns > 0
    assert trace.meta["amp"] == "bf16"


def test_capture_errors_are_one_line(tmp_path, capsys):
    assert main(["capture", "--model", "graph_torch", *TINY, "--out", str(tmp_path / "g")]) == 2
    assert "runs only on a GPU" in capsys.readouterr().err
    assert main(["capture", "--model", "nope_torch", *TINY]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert main(["capture", "--model", "fine_torch", *TINY[:2], "--batch", "0"]) == 2
    assert "--batch: must be positive" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    assert main(["capture", "--model", "fine_torch", *TINY, "--out", str(busy)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (busy / "keep.txt").read_text() == "mine"


@pytest.mark.capture
def test_runner_failure_is_reported(tmp_path, capsys):
    """--device cuda on a machine without one fails inside the runner process."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code = main(["capture", "--model", "cudnn_torch", *TINY[:-2], "--device", "cuda",
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2
    assert "no CUDA device" in err and "runner.log" in err and "Traceback" not in err


def test_models_lists_every_variant(capsys):
    assert main(["models", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(VARIANTS)
    assert rows["fine_torch"]["available"]
    import torch

    assert rows["graph_torch"]["available"] == torch.cuda.is_available()


@pytest.mark.capture
@pytest.mark.parametrize("preset", ["deepbench", "rnn_bench", "seq100", "imdb"])
def test_every_preset_trains(tmp_path, preset, capsys):
    out = tmp_path / preset
    extra = ["--sparse-embedding"] if preset == "imdb" else []
    code = main(["capture", "--model", "fused_torch", "--preset", preset, "--mode", "train",
                 "--batch", "4", "--seq", "6", "--hidden", "16", "--layers", "1",
                 "--warmup", "1", "--steps", "2", "--profile-steps", "1", "--device", "cpu",
                 "--out", str(out), *extra])
    assert code == 0, capsys.readouterr().err
    trace = Trace.load(out / "trace.parquet")
    assert trace.meta["preset"] == preset
    assert {"forward", "backward", "optimizer"} <= set(trace.events["name"].astype(str))


def test_cpu_caps_and_overrides():
    from traceviz.runners.presets import make_workload

    w, notes = make_workload("ptb_lm", None, "cpu")
    assert (w.batch, w.seq, w.hidden, w.layers, w.vocab) == (16, 20, 256, 3, 10001)
    assert notes and "under a minute" in notes[0]
    w, notes = make_workload("ptb_lm", "forward", "cpu", batch=128, seq=50)
    assert (w.batch, w.seq, w.mode) == (128, 50, "forward") and not notes
    w, _ = make_workload("ptb_lm", None, "cuda")
    assert (w.batch, w.seq) == (128, 50)
    w, _ = make_workload("rnn_bench", None, "cuda", hidden=1024)
    assert w.input == w.hidden == 1024  # rnn_bench feeds input = hidden
