"""Graph-replayed captures (`capture --graph-replay`): the refusals, on any machine; the
timing's bookkeeping; on a GPU, a real capture and the replayed outputs."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from tests.conftest import needs
from traceviz.capture.parent import (
    CaptureRequest,
    check_graph_replay,
    run_capture,
)
from traceviz.cli import main
from traceviz.errors import UsageError
from traceviz.runners.presets import make_workload
from traceviz.runners.torch.refusals import graph_replay_refusal

CPU_LINE = "--graph-replay: captures the forward pass in a CUDA graph and needs --device cuda"
TINY = ["--batch", "2", "--seq", "3", "--hidden", "8", "--layers", "1", "--vocab", "20",
        "--embed", "4", "--warmup", "1", "--steps", "2", "--profile-steps", "1"]


def _request(model: str, device: str, mode: str = "forward", **kw) -> CaptureRequest:
    workload, _ = make_workload("ptb_lm", mode, device, batch=2, seq=3, hidden=8, layers=1,
                                vocab=20, embed=4)
    return CaptureRequest(model, workload, device, warmup=1, steps=2, profile_steps=1,
                          graph_replay=True, **kw)


def test_cli_refuses_graph_replay_on_a_cpu(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["capture", "--model", "fused_torch", "--graph-replay", "--device", "cpu",
                 *TINY, "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"traceviz: error: {CPU_LINE}"]
    assert not out.exists()  # refused before anything ran: no run folder


@pytest.mark.parametrize(("args", "line"), [
    (["--model", "fused_torch", "--mode", "train"],
     "--graph-replay: captures the forward pass only and needs --mode forward (graph_torch "
     "replays training in CUDA graphs)"),
    (["--model", "graph_torch"],
     "--graph-replay: graph_torch replays its forward pass from a CUDA graph already"),
    (["--model", "compile_full_torch"],
     "--graph-replay: compile_full_torch (torch.compile, mode reduce-overhead) replays CUDA "
     "graphs of its own, which cannot be captured in another; --compile-mode default (no "
     "CUDA graphs) can be"),
    (["--model", "compile_full_torch", "--compile-mode", "max-autotune"],
     "--graph-replay: compile_full_torch (torch.compile, mode max-autotune) replays CUDA "
     "graphs of its own, which cannot be captured in another; --compile-mode default (no "
     "CUDA graphs) can be"),
])
def test_cli_refuses_what_cannot_be_graph_replayed(tmp_path, capsys, args, line):
    # --device cuda needs no GPU to be refused: the check comes before the runner
    mode = [] if "--mode" in args else ["--mode", "forward"]  # ptb_lm's own is train
    assert main(["capture", *args, *mode, "--graph-replay", "--device", "cuda", *TINY,
                 "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"traceviz: error: {line}"]


def test_request_refused_before_the_runner_starts(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with pytest.raises(UsageError) as e:
        run_capture(_request("fused_torch", "cpu"), run_dir)
    assert e.value.cli_text() == CPU_LINE
    assert str(e.value) == CPU_LINE.removeprefix("--").replace("-replay", "_replay", 1)
    assert list(run_dir.iterdir()) == []  # no config.json, no runner.log
    check_graph_replay(_request("fused_torch", "cuda"))  # runnable: no error
    assert graph_replay_refusal("compile_full_torch", "cuda", "forward",
                                {"compile_mode": "default"}) is None
    assert graph_replay_refusal("scan_jax", "cuda", "forward") == \
        "applies to the PyTorch variants; scan_jax is a jax variant"


def test_config_records_graph_replay():
    cfg = _request("fused_torch", "cuda").config()
    assert cfg["graph_replay"] is True
    plain = CaptureRequest("fused_torch", _request("fused_torch", "cuda").workload, "cuda")
    assert plain.config()["graph_replay"] is False
    from traceviz.files.runfolder import run_meta

    assert run_meta(cfg, None, None)["graph_replay"] is True
    assert "graph_replay" not in run_meta(plain.config(), None, None)


@pytest.mark.capture
def test_runner_refuses_graph_replay_on_a_cpu(tmp_path):
    """The runner itself refuses a config that asks for it (one line, exit 1)."""
    needs("torch")
    cfg = _request("fused_torch", "cpu").config()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    proc = subprocess.run([sys.executable, "-m", "traceviz.runners.torch", "--config",
                           str(path), "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events == [{"event": "error", "message": CPU_LINE}]
    assert not (tmp_path / "bench.json").exists()


def test_replay_phases_splits_the_event_times():
    needs("torch")
    from traceviz.runners.benchdefs import first_call_seconds
    from traceviz.runners.capture_protocol import Phases
    from traceviz.runners.torch.graphs import GraphCaptureError, replay_phases

    wall = Phases(times=[0.020, 0.022, 0.021], elapsed=0.063, prof_times=[0.030, 0.034],
                  warmup_times=[1.5, 0.021], warmup_settled=True)
    # one replay per step: 2 warm-up, 3 timed, 1 unmarked + 1 profiler warm-up, 2 marked
    replays = [0.9, 0.011, 0.010, 0.012, 0.011, 0.5, 0.5, 0.013, 0.014]
    timed, extra = replay_phases(wall, replays)
    assert timed.times == [0.010, 0.012, 0.011] and timed.prof_times == [0.013, 0.014]
    assert timed.warmup_times == wall.warmup_times and timed.elapsed == wall.elapsed
    assert extra["timing"] == "cuda_events" and extra["graph_replay"] is True
    assert extra["wall_batch_times_s"] == wall.times
    assert extra["wall_time_per_batch_s"]["median"] == 0.021
    # the steady profiled step: the profiler's start-up step (the first) left out
    assert extra["wall_profiled_time_per_batch_s"] == pytest.approx(0.034)
    assert extra["first_call_s"] == pytest.approx(first_call_seconds(wall.warmup_times, 0.021))
    with pytest.raises(GraphCaptureError, match="8 replays timed for 9 steps"):
        replay_phases(wall, replays[:-1])


GRAPH_VARIANTS = ["fused_torch", "streams_torch", "wavefront_torch", "naive8_torch",
                  "cudnn_torch"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GRAPH_VARIANTS)
def test_forward_graph_replays_the_eager_forward(name):
    torch = needs("torch")
    from traceviz.runners.torch.graphs import ForwardGraph
    from traceviz.runners.torch.variants import build

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    ref = torch.nn.LSTM(6, 8, 3).cuda()
    model = build(name, 6, 8, 3).cuda()
    model.load_lstm(ref)
    graphed = ForwardGraph(model, timed=True)
    with torch.no_grad():
        for k in range(3):  # new inputs each call: each replay reads the copied batch
            x = torch.randn(7, 3, 6, device="cuda")
            out, (h, c) = graphed(x)
            out, h, c = out.clone(), h.clone(), c.clone()
            want, (h_want, c_want) = model(x)
            assert torch.allclose(out, want, atol=1e-5), k
            assert torch.allclose(h, h_want, atol=1e-5) and torch.allclose(c, c_want, atol=1e-5)
    times = graphed.times_s()
    assert len(times) == 3 and all(0 < t < 1 for t in times)


@pytest.mark.gpu
def test_graph_replayed_capture_is_a_run_folder(tmp_path, capsys):
    needs("torch")
    out = tmp_path / "run"
    assert main(["capture", "--model", "fused_torch", "--graph-replay", "--device", "cuda",
                 "--mode", "forward", *TINY, "--out", str(out)]) == 0, capsys.readouterr().err
    bench = json.loads((out / "bench.json").read_text())
    assert json.loads((out / "config.json").read_text())["graph_replay"] is True
    assert bench["graph_replay"] is True and bench["timing"] == "cuda_events"
    times, wall = bench["batch_times_s"], bench["wall_batch_times_s"]
    assert len(times) == len(wall) == bench["batches"] == 2
    assert bench["time_per_batch_s"]["median"] == statistics.median(times)
    assert bench["sequences_per_s"] == pytest.approx(2 / statistics.median(times))
    # a replay's device time lies inside its step's wall time
    assert all(0 < t <= w for t, w in zip(times, wall, strict=True))
    assert bench["wall_time_per_batch_s"]["median"] == statistics.median(wall)
    capsys.readouterr()
    assert main(["analyze", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kernels"]["count"] > 0
    import traceviz

    names = set(traceviz.load(out).events["name"].astype(str))
    assert any(n.startswith("cudaGraphLaunch") for n in names)
