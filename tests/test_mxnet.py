"""MXNet: the mx.profiler parser on a real capture, and gluon_mxnet through `traceviz capture`.

Needs the MXNet interpreter (.ci/run creates ./.venv-mxnet with `traceviz env mxnet`);
without one the capture tests skip and the refusal is tested instead.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.conftest import ROOT
from traceviz.analyses import summarize
from traceviz.cli import main
from traceviz.parsers import detect_format, load
from traceviz.runners import MXNET_ENV, mxnet_python
from traceviz.trace import Trace

PYTHON = mxnet_python() or (str(ROOT / MXNET_ENV / "bin" / "python")
                            if (ROOT / MXNET_ENV / "bin" / "python").is_file() else None)
needs_mxnet = pytest.mark.requires(PYTHON is None, "no MXNet interpreter "
                                   "(`traceviz env mxnet`; .ci/run makes one)")
TINY = ["--batch", "8", "--seq", "12", "--hidden", "16", "--embed", "8", "--vocab", "100",
        "--warmup", "1", "--steps", "3", "--profile-steps", "2", "--device", "cpu"]


def _capture(tmp_path, *args: str) -> tuple[int, object]:
    out = tmp_path / "run"
    code = main(["capture", "--model", "gluon_mxnet", "--python", str(PYTHON), *args, *TINY,
                 "--out", str(out)])
    return code, out


def _raw_pairs(raw: dict) -> tuple[Counter, list[tuple[str, float]]]:
    """Operator B/E pairs and step tasks, paired here with a stack per thread."""
    ops: Counter = Counter()
    stacks: dict = {}
    steps = {}
    for e in raw["traceEvents"]:
        if e.get("cat") == "operator" and e["ph"] in "BE":
            key = (e["pid"], e["tid"])
            if e["ph"] == "B":
                stacks.setdefault(key, []).append(e)
            else:
                b = stacks[key].pop()
                assert b["name"] == e["name"]
                ops[e["name"]] += 1
        elif e.get("cat") == "traceviz":
            steps.setdefault(e["name"], []).append(e["ts"])
    return ops, [(n, (t[1] - t[0]) * 1000) for n, t in steps.items()]


@pytest.mark.capture
@needs_mxnet
def test_gluon_imdb_train_capture(tmp_path, capsys):
    code, out = _capture(tmp_path, "--preset", "imdb", "--workers", "0")
    assert code == 0, capsys.readouterr().err
    assert {"trace.mxnet.json", "trace.parquet", "bench.json", "meta.json"} <= \
        {p.name for p in out.iterdir()}
    raw = json.loads((out / "trace.mxnet.json").read_text())
    ops, steps = _raw_pairs(raw)
    assert detect_format(out / "trace.mxnet.json") == "mxnet"
    trace = Trace.load(out / "trace.parquet")
    ev = trace.events
    got = Counter(ev[ev["kind"] == "op"]["name"].astype(str))
    assert got == ops and ops["RNN"] == 2 and ops["_backward_RNN"] == 2
    step_rows = ev[ev["kind"] == "step"].sort_values("step")
    assert list(step_rows["name"].astype(str)) == ["step 2", "step 3"]
    assert list(step_rows["dur_ns"]) == [round(d) for _, d in sorted(steps)]
    assert trace.meta["runner"]["framework"] == "mxnet"
    assert trace.meta["runner"]["framework_version"] == "1.9.1"
    assert trace.meta["profiler"] == "mx.profiler" and trace.meta["workload"]["workers"] == 0
    s = summarize(trace)
    assert s.cpu_trace and s.steps == 2
    rnn = s.kernels[s.kernels["name"] == "RNN"]
    assert rnn["category"].iloc[0] == "rnn" and int(rnn["count"].iloc[0]) == 2
    bench = json.loads((out / "bench.json").read_text())
    assert bench["batches"] == 3 and bench["sequences_per_s"] == pytest.approx(
        8 / bench["time_per_batch_s"]["median"])


@pytest.mark.capture
@needs_mxnet
def test_gluon_vs_torch_compare(tmp_path, capsys):
    """The seed's comparison: same preset and workers in both frameworks, then compare."""
    code, mx_out = _capture(tmp_path, "--preset", "imdb", "--workers", "2")
    assert code == 0, capsys.readouterr().err
    torch_out = tmp_path / "torch"
    assert main(["capture", "--model", "cudnn_torch", "--preset", "imdb", "--workers", "2",
                 "--sparse-embedding", *TINY, "--out", str(torch_out)]) == 0
    t = Trace.load(torch_out / "trace.parquet")
    assert t.meta["workload"]["workers"] == 2 and t.meta["workload"]["sparse_embedding"]
    assert (t.events["name"].astype(str) == "data").sum() == 2  # one fetch per step
    capsys.readouterr()
    assert main(["compare", str(mx_out / "trace.parquet"), str(torch_out / "trace.parquet")]) == 0
    out = capsys.readouterr().out
    assert "gluon_mxnet" in out and "cudnn_torch" in out and "sequences/s" in out


@pytest.mark.capture
@needs_mxnet
def test_gluon_refuses_amp(tmp_path, capsys):
    code, _ = _capture(tmp_path, "--preset", "imdb", "--amp", "bf16")
    assert code == 2 and "fp32 only" in capsys.readouterr().err


def test_missing_interpreter_is_one_line(tmp_path, capsys):
    code = main(["capture", "--model", "gluon_mxnet", "--python", str(tmp_path / "nope"),
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "traceviz env mxnet" in err


def test_mxnet_profile_bad_input(tmp_path, capsys):
    path = tmp_path / "prof.json"
    path.write_text('{"traceEvents": [{"name": "x", "cat": "operator", "ph": "B", "ts": 1')
    assert main(["analyze", str(path)]) == 2
    assert "MXNet" in capsys.readouterr().err
    path.write_text('{"traceEvents": [{"name": "MXNDArrayFree", "cat": "MXNET_C_API", '
                    '"ph": "b", "ts": 1, "pid": 0, "tid": 0, "id": 1}]}')
    assert main(["analyze", str(path)]) == 2
    assert "no operator rows" in capsys.readouterr().err
    assert detect_format(path) == "mxnet" and load is not None


@needs_mxnet
def test_env_command_finds_a_working_environment(tmp_path, capsys):
    """`traceviz env mxnet` on an environment that already imports mxnet: reused as is."""
    from pathlib import Path

    env = Path(PYTHON).parent.parent
    assert main(["env", "mxnet", "--path", str(env)]) == 0
    assert str(env / "bin" / "python") in capsys.readouterr().out
