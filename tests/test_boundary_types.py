"""Types across the process boundary: the ``Workload`` a runner rebuilds from its config,
the keys ``Trace.meta`` may hold (``TraceMeta``), and the runner skeleton of
``runners/capture_protocol.py`` (the real captures per framework run it in test_capture,
test_tensorflow..., test_mxnet)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from dataclasses import replace

import pytest

from tests.conftest import ROOT, SHARED_TRACES
from traceviz.runners import capture_protocol
from traceviz.runners.benchdefs import Workload
from traceviz.runners.presets import PRESETS, make_workload
from traceviz.table.meta import TraceMeta

META_KEYS = set(TraceMeta.__annotations__)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_workload_round_trip_for_every_preset(preset):
    w = PRESETS[preset]
    d = w.to_dict()
    assert Workload.from_dict(d) == w
    assert Workload.from_dict(d).to_dict() == d
    # through JSON, as config.json carries it, and with the flags a capture sets
    w2, _ = make_workload(preset, "forward", "cpu", workers=2, hidden=8)
    assert Workload.from_dict(json.loads(json.dumps(w2.to_dict()))) == w2


def test_workload_from_dict_leaves_out_unknown_keys_and_needs_the_shape():
    d = PRESETS["imdb"].to_dict() | {"added_later": 1}
    assert Workload.from_dict(d) == PRESETS["imdb"]
    d.pop("added_later")
    d.pop("hidden")
    with pytest.raises(TypeError):
        Workload.from_dict(d)


def test_workload_helpers():
    w = PRESETS["ptb_lm"]
    assert w.train and not w.loader and w.outputs == w.vocab
    assert PRESETS["imdb"].outputs == 2 and PRESETS["rnn_bench"].outputs is None
    assert replace(w, workers=0).loader


def test_the_runner_side_loads_without_traceviz():
    """The MXNet runner's interpreter has no traceviz: capture_protocol.py finds benchdefs.py (the
    figures and the Workload) beside it; standard library only."""
    code = ("import sys\n"
            "sys.modules['traceviz'] = None  # any import of it fails\n"
            f"sys.path.insert(0, {str(ROOT / 'runners')!r})\n"
            "import capture_protocol as protocol\n"
            "w = protocol.Workload.from_dict({'preset': 'p', 'batch': 2, 'seq': 3, "
            "'hidden': 4, 'layers': 1, 'input': 4, 'vocab': 0, 'embed': 0, 'head': 'none', "
            "'classes': 0, 'loss': 'mse', 'optimizer': 'sgd', 'lr': 0.1, 'mode': 'forward'})\n"
            "print(w.batch, protocol.workload_flops(w.to_dict())['total'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "2"


def test_skeleton_runs_the_phases_and_writes_the_records(tmp_path, capsys):
    """``capture_protocol.capture`` with a set-up of plain Python: the phases in order, inside
    ``within``; bench.json from the phases, the framework's figures and ``retime``'s;
    meta.json with the shared keys and the framework's own."""
    calls: list[str] = []
    cfg = {"model": "toy", "workload": PRESETS["deepbench"].to_dict(), "device": "cpu",
           "seed": 1, "amp": None, "warmup": 1, "max_warmup": 1, "steps": 3,
           "profile_steps": 2}

    @contextlib.contextmanager
    def within():
        calls.append("enter")
        yield
        calls.append("exit")

    def setup(run: capture_protocol.RunConfig) -> capture_protocol.Capture:
        assert run.workload == PRESETS["deepbench"] and not run.train and run.out == tmp_path
        return capture_protocol.Capture(
            framework="toy", version="1.0", device_name="cpu here", profiler="none",
            step=lambda: calls.append("step") or 0.5, start=lambda: calls.append("start"),
            stop=lambda: calls.append("stop"),
            around_step=lambda i: contextlib.nullcontext(), trace=lambda: tmp_path / "t",
            within=within, bench=lambda: {"framework_compile_s": None},
            retime=lambda p: (p, {"timing": "wall"}), meta={"extra": True})

    done = capture_protocol.capture(setup, cfg, tmp_path)
    # 1 warm-up, 3 timed, 2 unmarked + 2 profiled steps, the profiler around the last 2
    assert calls == ["enter", *["step"] * 6, "start", "step", "step", "stop", "exit"]
    bench = json.loads((tmp_path / "bench.json").read_text())
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert done == {"bench": bench, "meta": meta, "trace": str(tmp_path / "t")}
    assert bench["batches"] == 3 and bench["profiled_batches"] == 2
    assert bench["loss_per_batch"] == [0.5] * 3 and bench["timing"] == "wall"
    assert "framework_compile_s" in bench and bench["workload_flops"] > 0
    assert list(meta) == ["framework", "framework_version", "python", "device_name",
                          "profiler", "extra"]


def test_skeleton_reports_a_runner_error_in_one_line(tmp_path, capsys):
    def setup(run):
        raise capture_protocol.RunnerError("no such device")

    (tmp_path / "cfg.json").write_text(json.dumps({"model": "toy", "device": "cpu",
                                                   "seed": 0,
                                                   "workload": PRESETS["imdb"].to_dict()}))
    code = capture_protocol.serve_capture(setup, "toy", "toy runner",
                                  ["--config", str(tmp_path / "cfg.json"), "--out",
                                   str(tmp_path)])
    assert code == 1
    assert json.loads(capsys.readouterr().out) == {"event": "error",
                                                   "message": "no such device"}


TRACES = [ROOT / "sample_traces" / "gpu" / "fine_torch" / "train",
          SHARED_TRACES / "kineto" / "a100_diff_control.json.gz",
          SHARED_TRACES / "nsys" / "h100_2gpu_window.sqlite",
          SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz"]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_trace_meta_names_every_key_of_a_real_trace(path):
    import traceviz

    meta = traceviz.load(path).meta
    assert set(meta) <= META_KEYS, sorted(set(meta) - META_KEYS)
    assert {"source_format", "source_file", "origin_ns", "schema_version"} <= set(meta)


@pytest.mark.capture
def test_trace_meta_names_every_key_of_a_fresh_capture(tmp_path):
    from tests.conftest import needs

    needs("torch")
    from traceviz.cli import main
    from traceviz.trace import Trace

    out = tmp_path / "run"
    assert main(["capture", "--model", "fine_torch", "--preset", "ptb_lm", "--batch", "2",
                 "--seq", "3", "--hidden", "8", "--layers", "1", "--vocab", "20",
                 "--embed", "4", "--warmup", "1", "--steps", "2", "--profile-steps", "1",
                 "--device", "cpu", "--out", str(out)]) == 0
    meta = Trace.load(out / "trace.parquet").meta
    assert set(meta) <= META_KEYS, sorted(set(meta) - META_KEYS)
    assert {"model", "workload", "bench", "runner"} <= set(meta)
    # the same folder without its Parquet: the raw trace with the run's records
    (out / "trace.parquet").unlink()
    meta = __import__("traceviz").load(out).meta
    assert set(meta) <= META_KEYS, sorted(set(meta) - META_KEYS)
    assert {"model", "workload", "bench", "runner", "dtypes_recorded"} <= set(meta)
