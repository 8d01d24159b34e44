"""`traceviz capture -- python SCRIPT`: real user scripts (tests/scripts/) profiled in
subprocesses, and `traceviz.profile()` in-process. Figures are checked against the raw
torch.profiler JSON and the scripts' own step counts."""

from __future__ import annotations

import gzip
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, needs
from traceviz import Trace

SCRIPTS = ROOT / "examples"
TRACEVIZ = [sys.executable, "-m", "traceviz"]


def _capture(tmp_path: Path, *args: str, env: dict | None = None,
             cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "run"
    r = subprocess.run([*TRACEVIZ, "capture", "--out", str(out), *args], capture_output=True,
                       text=True, env=env, cwd=cwd, timeout=600)
    return r, out


def _raw(out: Path) -> list[dict]:
    with gzip.open(out / "trace.pt.trace.json.gz", "rt") as f:
        return json.load(f)["traceEvents"]


def _traceviz_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("traceviz:")]


def _no_run_left(out: Path) -> None:
    """Nothing that reads as a run: no folder, no hidden partial one beside it."""
    assert not out.exists()
    assert not list(out.parent.glob(f".{out.name}*"))


def _ops_from(events: list[dict], start_us: float, end_us: float = math.inf) -> list[dict]:
    """The raw trace's framework ops (``cpu_op``) starting in [start, end) (µs)."""
    return [e for e in events if e.get("cat") == "cpu_op" and start_us <= e["ts"] < end_us]


def _steps_in_raw(events: list[dict]) -> list[int]:
    return sorted(int(e["name"].split("#")[1]) for e in events
                  if e.get("cat") == "user_annotation"
                  and str(e.get("name", "")).startswith("ProfilerStep#"))


@pytest.mark.capture
def test_lstm_script_steps_from_the_optimizer(tmp_path):
    needs("torch")
    r, out = _capture(tmp_path, "--warmup", "2", "--profile-steps", "3", "--",
                      "python", str(SCRIPTS / "lstm_train.py"), "--steps", "10")
    assert r.returncode == 0, r.stderr
    assert "trained 10 steps" in r.stdout  # the script's own output passes through
    assert {p.name for p in out.iterdir()} >= {"trace.pt.trace.json.gz", "trace.parquet",
                                               "bench.json", "meta.json"}
    raw = _raw(out)
    # warm-up steps 0-1, the profiler's warm-up step 2, the active steps 3-5 (the
    # script's own step numbers)
    assert _steps_in_raw(raw) == [3, 4, 5]
    forward = [e for e in raw if e.get("cat") == "user_annotation" and e["name"] == "forward"]
    assert len(forward) == 3
    bench = json.loads((out / "bench.json").read_text())
    assert bench["steps_from"] == "optimizer"
    # 10 optimizer steps: 3 warm-up, 3 profiled, 4 timed after them
    assert (len(bench["warmup_times_s"]), bench["profiled_batches"], bench["batches"]) == \
        (3, 3, 4)
    assert bench["time_per_batch_s"]["median"] == statistics.median(bench["batch_times_s"])
    meta = json.loads((out / "meta.json").read_text())
    assert meta["exit_status"] == 0 and meta["step_marks"] == 10
    assert meta["command"][-3:] == [str(SCRIPTS / "lstm_train.py"), "--steps", "10"]
    trace = Trace.load(out / "trace.parquet")
    steps = trace.events[trace.events["kind"] == "step"]
    assert sorted(steps["name"].astype(str)) == [f"ProfilerStep#{k}" for k in (3, 4, 5)]
    assert trace.meta["bench"]["batches"] == 4 and trace.meta["model"] == "lstm_train.py"
    phases = trace.phases().set_index("phase")
    assert list(phases.index[:3]) == ["forward", "backward", "optimizer"]
    assert phases.loc["forward", "ranges"] == len(forward)


@pytest.mark.capture
def test_script_that_raises_keeps_what_was_recorded(tmp_path):
    needs("torch")
    # step 4 raises: warm-up 0-1, profiler warm-up 2, active 3 done, 4 cut short
    r, out = _capture(tmp_path, "--warmup", "2", "--profile-steps", "3", "--",
                      str(SCRIPTS / "lstm_train.py"), "--steps", "10", "--fail-at", "4")
    assert r.returncode == 1
    assert "RuntimeError: loss went NaN at step 4" in r.stderr
    assert 'lstm_train.py", line' in r.stderr  # Python's traceback, the script's frames
    assert "runners/script.py" not in r.stderr
    assert "exited with status 1" in r.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["exit_status"] == 1
    assert meta["error"] == "RuntimeError: loss went NaN at step 4"
    raw = _raw(out)
    assert _steps_in_raw(raw) == [3]  # the partial active phase is saved, whole steps only
    cut = [e for e in raw if e.get("name") == "unfinished step 4"]
    assert len(cut) == 1 and cut[0]["args"]["traceviz"] == "cut short: the code ended"
    # one note says how it ended, the summary's note what was left out
    assert "exited with status 1 (RuntimeError: loss went NaN at step 4) in step 4, during " \
        "the profiled steps (3-5): 1 of 3 recorded (step 3); the run folder keeps them" \
        in r.stderr
    assert "step 4, cut short when the code ended, is left out of every figure" in r.stdout
    bench = json.loads((out / "bench.json").read_text())
    assert bench["profiled_batches"] == 1 and "time_per_batch_s" in bench
    assert bench["timed_from"].startswith("the profiled steps")
    trace = Trace.load(out / "trace.parquet")
    assert trace.meta["exit_status"] == 1
    assert trace.events.loc[trace.events["kind"] == "step", "name"].tolist() == \
        ["ProfilerStep#3"]
    # step 4's rows are out of the table: every op left lies in step 3 or before it
    assert trace.meta["cut_step"]["step"] == 4
    assert trace.meta["cut_step"]["ops"] == len(_ops_from(raw, cut[0]["ts"]))
    ops = trace.events[trace.events["kind"] == "op"]
    assert (ops["ts_ns"] + trace.meta["origin_ns"] < cut[0]["ts"] * 1000).all()


# a complete script whose process dies in the interpreter's teardown, as DDP's on Gloo
# can (its worker thread, freeing the last all-reduce, needs the GIL the teardown no
# longer gives: std::terminate): the object freed there aborts
TEARDOWN = """
import atexit, ctypes, json, os, threading, time
import torch
class AbortsWhenFreed:
    def __del__(self):
        os.abort()
json.kept = AbortsWhenFreed()  # a module's: freed only in the teardown
atexit.register(print, "exit callback ran", flush=True)
trained = threading.Event()
def late():  # still running when the script's code ends: the interpreter waits for it
    trained.wait()
    time.sleep(0.5)
    print("thread done", flush=True)
threading.Thread(target=late).start()
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
print("trained", flush=True)
trained.set()
ctypes.CDLL(None).printf(b"native line\\n")  # C's stdio: buffered when stdout is a pipe
"""


@pytest.mark.capture
def test_a_death_in_the_interpreter_teardown_is_no_crash_of_the_run(tmp_path):
    """Once the script and the run are done, the runner ends as the interpreter's shutdown
    begins (the script's threads waited for, its exit callbacks run) and leaves before the
    teardown, where the script alone dies by SIGABRT."""
    needs("torch")
    script = tmp_path / "teardown.py"
    script.write_text(TEARDOWN)
    # C's stdio buffered, as it is without PYTHONUNBUFFERED (which unbuffers it too)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    alone = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=env, timeout=120)
    assert alone.returncode == -6  # SIGABRT, in the teardown: the work was all done
    python_lines = ["trained", "thread done", "exit callback ran"]
    assert [x for x in alone.stdout.splitlines() if x in python_lines] == python_lines
    r, out = _capture(tmp_path, "--warmup", "1", "--profile-steps", "2", "--",
                      sys.executable, str(script), env=env)
    assert r.returncode == 0, r.stderr
    said = r.stdout.splitlines()
    assert [x for x in said if x in python_lines] == python_lines
    assert "native line" in said  # what native code printed is flushed on the way out
    assert "crashed" not in r.stderr and "SIGABRT" not in r.stderr, r.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["exit_status"], meta["error"], meta["step_marks"]) == (0, None, 6)
    assert _steps_in_raw(_raw(out)) == [2, 3]


@pytest.mark.capture
def test_script_that_ends_before_the_profiled_steps_says_so(tmp_path):
    needs("torch")
    # 4 steps, --warmup 3: steps 0-2 unprofiled, step 3 the profiler's warm-up, and step 4
    # (the first profiled one) holds only the script's end
    r, out = _capture(tmp_path, "--", str(SCRIPTS / "lstm_train.py"), "--steps", "4")
    assert r.returncode == 2, r.stderr  # no run: the capture failed, not the script
    assert _traceviz_lines(r.stderr)[-1] == (
        "traceviz: lstm_train.py ended in step 4, before a whole profiled step (4-6): "
        "nothing recorded, no run folder left; lower --warmup (now 3) or run more steps")
    assert "Traceback" not in r.stderr and "note:" not in r.stderr
    _no_run_left(out)


@pytest.mark.capture
def test_script_without_steps_is_cut_into_time_slices(tmp_path):
    needs("torch")
    r, out = _capture(tmp_path, "--slice", "0.02", "--", str(SCRIPTS / "mlp_infer.py"),
                      "--batches", "60", "--exit3")
    assert r.returncode == 3  # the script's sys.exit(3)
    assert "ran 60 batches" in r.stdout
    assert "marked no step" in r.stderr and "fixed time slices of 20 ms" in r.stderr
    raw = _raw(out)
    host = [e for e in raw if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    span_us = max(e["ts"] + e["dur"] for e in host) - min(e["ts"] for e in host)
    slices = [e for e in raw if e.get("args", {}).get("traceviz") == "fixed time slice"]
    assert len(slices) == math.ceil(span_us / 20_000)
    assert sum(e["dur"] for e in slices) == pytest.approx(span_us)
    bench = json.loads((out / "bench.json").read_text())
    assert bench["steps_from"] == "fixed time slices" and "batch_times_s" not in bench
    trace = Trace.load(out / "trace.parquet")
    linear = [e for e in host if e["name"] == "aten::linear"]
    assert len(linear) == 2 * 60  # the whole run was recorded
    assert (trace.events["kind"] == "step").sum() == len(slices)


@pytest.mark.capture
def test_traceviz_step_marks_and_module_ranges(tmp_path):
    needs("torch")
    r, out = _capture(tmp_path, "--warmup", "1", "--profile-steps", "2", "--modules",
                      "--top", "5", "--",
                      str(SCRIPTS / "cnn_marked.py"), "--steps", "6")
    assert r.returncode == 0, r.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["step_marks"] == 6  # traceviz.step(), not the 12 optimizer steps
    assert json.loads((out / "bench.json").read_text())["steps_from"] == "traceviz.step"
    raw = _raw(out)
    assert _steps_in_raw(raw) == [2, 3]
    # every module call in the active steps is a range: 2 forward passes per step
    steps = [e for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")]
    lo, hi = min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps)
    calls = [e for e in raw if e.get("cat") == "user_annotation"
             and e["name"] == "module: 0 (Conv2d)" and lo <= e["ts"] < hi]
    assert len(calls) == 4
    summary = json.loads(subprocess.run(
        [*TRACEVIZ, "analyze", str(out / "trace.parquet"), "--json"], capture_output=True,
        text=True, check=True).stdout)
    mods = {m["module"]: m for m in summary["modules"]}
    assert list(mods)[:2] == ["Sequential", "0 (Conv2d)"]
    assert mods["0 (Conv2d)"]["calls"] == 4 and mods["0 (Conv2d)"]["depth"] == 1
    # inclusive: the model holds its children's work
    children = sum(m["kernel_ns"] for m in mods.values() if m["depth"] == 1)
    assert mods["Sequential"]["kernel_ns"] >= children > 0
    assert "Modules per step" in r.stdout


@pytest.mark.capture
def test_module_form_and_next_lines_work_without_the_venv_on_path(tmp_path):
    needs("torch")
    env = dict(os.environ, PATH="/usr/bin:/bin")  # the venv not activated
    r, out = _capture(tmp_path, "--warmup", "1", "--profile-steps", "1", "--slice", "0.05",
                      "--", "-m", "mlp_infer", "--batches", "5", env=env, cwd=SCRIPTS)
    assert r.returncode == 0, r.stderr
    assert "ran 5 batches" in r.stdout
    lines = r.stdout.splitlines()
    nxt = lines[lines.index("next:") + 1:]
    assert nxt and all(line.startswith(f"  {Path(sys.executable).parent / 'traceviz'} ")
                       for line in nxt[:2])
    # the printed command works as printed, from a shell without the venv
    first = shlex.split(nxt[1])
    assert subprocess.run(first, env=env, cwd=SCRIPTS, capture_output=True).returncode == 0


@pytest.mark.capture
def test_keras_fit_script_under_the_tensorflow_profiler(tmp_path):
    needs("tensorflow")
    r, out = _capture(tmp_path, "--warmup", "2", "--profile-steps", "3", "--",
                      "python", str(SCRIPTS / "keras_fit.py"), "--batches", "10")
    assert r.returncode == 0, r.stderr
    assert "fitted" in r.stdout and "TensorFlow profiler" in r.stderr
    assert list(out.glob("tfprofile/plugins/profile/*/*.xplane.pb"))
    bench = json.loads((out / "bench.json").read_text())
    assert bench["steps_from"] == "Model.fit batches"
    assert (len(bench["warmup_times_s"]), bench["profiled_batches"], bench["batches"]) == \
        (3, 3, 4)
    trace = Trace.load(out / "trace.parquet")
    steps = sorted(set(trace.events.loc[trace.events["step"] >= 0, "step"]))
    assert steps == [3, 4, 5]


def test_profile_in_process(tmp_path):
    torch = needs("torch")
    import traceviz

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    with traceviz.profile(steps=2, warmup=1, out=tmp_path / "p", modules=True) as p:
        for _ in range(7):
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            p.step()  # explicit marks: the optimizer's do not count twice
    assert p.trace is not None
    steps = p.trace.events[p.trace.events["kind"] == "step"]
    assert sorted(steps["name"].astype(str)) == ["ProfilerStep#2", "ProfilerStep#3"]
    assert p.bench["steps_from"] == "traceviz.step" and p.bench["batches"] == 7 - 4
    mods = p.trace.summary()["modules"]
    assert [m["module"] for m in mods] == ["Sequential", "0 (Linear)", "1 (Tanh)",
                                           "2 (Linear)"]
    assert all(m["calls"] == 2 for m in mods)
    assert (tmp_path / "p" / "trace.parquet").is_file()
    traceviz.step()  # outside a session: nothing happens
    # a notebook runs the cell again: the function is still the function
    with traceviz.profile(steps=1, warmup=1, out=tmp_path / "again") as q:
        for _ in range(4):
            model(x).sum().backward()
            opt.step()
    assert q.trace is not None and q.bench["steps_from"] == "optimizer"


@pytest.mark.parametrize("args, words", [
    (["--model", "fine_torch", "--", "x.py"], "--model is for the built-in variants"),
    (["--", "python", "missing.py"], "missing.py: no such file"),
    (["--", "notes.txt"], "not a Python script"),
    (["--", "python", str(ROOT / "sample_traces" / "script" / "lstm_train" /
                          "trace.pt.trace.json.gz")], "not Python source"),
    (["--modules", "--model", "fine_torch"], "--modules: is for a script"),
    (["--", "python", "-X", "dev", "a.py"], "interpreter option -X is not supported (-X "
     "dev): set PYTHONDEVMODE=1 in the environment instead"),
    (["--", "python", "-c", "print(1)"], "code given with -c cannot be profiled: traceviz "
     "runs a script file or a module; save the code as a file"),
    (["--slice", "0", "--", "a.py"], "--slice: is a positive number"),
    (["--steps", "5", "--", "a.py"], "--steps is for the built-in variants"),
    (["--", "-m", "no_such_module_here"], "no module named 'no_such_module_here'"),
    (["--profile-steps", "0", "--", "a.py"], "--profile-steps: is at least 1"),
    (["--batch-size", "0", "--", "a.py"], "--batch-size: is at least 1"),
    (["--batch-size", "8", "--model", "fine_torch"], "--batch-size: is for a script"),
])
def test_script_usage_errors_are_one_line(tmp_path, args, words):
    r = subprocess.run([*TRACEVIZ, "capture", *args], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 2
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


LOOP = """
import sys, time
import torch
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 8)
step = 0
while True:
    model(x).sum().backward()
    opt.step()
    step += 1
    if step == 12:
        print("step 12", flush=True)
    time.sleep(0.01)
"""


@pytest.mark.capture
def test_ctrl_c_stops_the_script_and_keeps_the_recording(tmp_path):
    needs("torch")
    import signal
    import time

    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    out = tmp_path / "run"
    proc = subprocess.Popen([*TRACEVIZ, "capture", "--warmup", "1", "--profile-steps", "2",
                             "--out", str(out), "--", str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    for line in proc.stdout:  # step 12: the profiled steps (2-3) are long done
        if line.startswith("step 12") or time.monotonic() > deadline:
            break
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "KeyboardInterrupt" in stderr
    assert "note: interrupted after the profiled steps; the run folder keeps them" in stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["error"] == "KeyboardInterrupt" and meta["step_marks"] >= 12
    assert _steps_in_raw(_raw(out)) == [2, 3]
    assert Trace.load(out / "trace.parquet").meta["exit_status"] == 130


# each step prints its number after its forward and backward; step 4 then waits for Ctrl-C
SLOW_AT_4 = """
import time
import torch
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 8)
step = 0
while True:
    model(x).sum().backward()
    print(f"step {step}", flush=True)
    time.sleep(0.02 if step != 4 else 60)
    opt.step()
    step += 1
"""


def _interrupted(tmp_path: Path, at: str, *args: str) -> tuple[int, str, str, Path]:
    """``capture ARGS -- python slow.py``, Ctrl-C (SIGINT to the process group, as a
    terminal sends it) once the script prints ``at``."""
    import signal

    script = tmp_path / "slow.py"
    script.write_text(SLOW_AT_4)
    out = tmp_path / "run"
    proc = subprocess.Popen([*TRACEVIZ, "capture", *args, "--out", str(out), "--",
                             str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == at:
            break
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    return proc.returncode, stdout, stderr, out


@pytest.mark.capture
def test_ctrl_c_during_the_profiled_steps_leaves_the_cut_step_out(tmp_path):
    needs("torch")
    # steps 2-6 profiled; Ctrl-C in step 4, after its forward and backward
    status, stdout, stderr, out = _interrupted(tmp_path, "step 4", "--warmup", "1",
                                               "--profile-steps", "5")
    assert status == 130, stderr
    notes = [line for line in stderr.splitlines() if line.startswith("note:")]
    assert notes[-1] == ("note: interrupted in step 4, during the profiled steps (2-6): 2 "
                         "of 5 recorded (steps 2-3); the run folder keeps them"), stderr
    assert "USDT" not in stderr
    assert "traceviz: step 1 warms the profiler up; recording steps 2-6 for " \
        f"{out}" in stderr
    raw = _raw(out)
    assert _steps_in_raw(raw) == [2, 3]
    cut = next(e for e in raw if e.get("name") == "unfinished step 4")
    # from the raw trace: each whole step's ops, and the cut step's (its forward, backward)
    per_step = {int(e["name"].split("#")[1]): len(_ops_from(raw, e["ts"], e["ts"] + e["dur"]))
                for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")}
    assert per_step[2] == per_step[3] > 0
    in_cut = _ops_from(raw, cut["ts"])
    assert len(in_cut) > 0
    trace = Trace.load(out / "trace.parquet")
    ops = trace.events[trace.events["kind"] == "op"]
    # the Trace holds the whole steps' ops, step by step, and none of the cut step's
    assert ops.groupby("step").size().drop(-1, errors="ignore").to_dict() == per_step
    assert len(ops) == len(_ops_from(raw, -math.inf, cut["ts"]))
    assert trace.meta["cut_step"] == {"step": 4, "ops": len(in_cut),
                                      "rows": trace.meta["cut_step"]["rows"],
                                      "span_ns": trace.meta["cut_step"]["span_ns"]}
    assert not (trace.events["name"] == "unfinished step 4").any()
    # every figure: the leaf ops counted are those of the 2 whole steps
    summary = trace.summary()
    assert summary["steps"] == 2
    assert summary["kernels"]["count"] == 2 * summary["timed_step"]["kernels_per_step"]
    assert f"step 4, cut short when the code ended, is left out of every figure: its " \
        f"{len(in_cut)} ops" in stdout


@pytest.mark.capture
def test_ctrl_c_before_the_profiled_steps_leaves_no_run(tmp_path):
    needs("torch")
    # steps 6-8 profiled; Ctrl-C in step 4
    status, stdout, stderr, out = _interrupted(tmp_path, "step 4", "--warmup", "5")
    assert status == 130, stderr
    assert _traceviz_lines(stderr)[-1] == (
        "traceviz: interrupted in step 4, before the profiled steps (6-8): nothing "
        "recorded, no run folder left")
    assert "note:" not in stderr and "--warmup" not in stderr and "USDT" not in stderr
    _no_run_left(out)


@pytest.mark.capture
def test_script_without_framework_ops_says_so(tmp_path):
    needs("torch")
    script = tmp_path / "plain.py"
    script.write_text("import sys\nprint('args', sys.argv[1:])\n")
    r, out = _capture(tmp_path, "--", str(script), "a", "b")
    assert r.returncode == 2, r.stderr
    assert "args ['a', 'b']" in r.stdout
    assert _traceviz_lines(r.stderr)[-1] == (
        "traceviz: plain.py ended before it ran anything to profile: nothing recorded, no "
        "run folder left")
    assert "Traceback" not in r.stderr and "note:" not in r.stderr
    _no_run_left(out)


@pytest.mark.capture
def test_script_failing_on_its_arguments_leaves_no_run(tmp_path):
    needs("torch")
    r, out = _capture(tmp_path, "--", str(SCRIPTS / "lstm_train.py"), "--no-such-flag")
    assert r.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in r.stderr  # argparse's, the script's
    # one line, no note beside it that says otherwise
    assert _traceviz_lines(r.stderr)[-1] == (
        "traceviz: lstm_train.py exited with status 2 before it ran anything to profile: "
        "nothing recorded, no run folder left")
    assert "note:" not in r.stderr and "USDT" not in r.stderr
    _no_run_left(out)


@pytest.mark.capture
def test_script_with_its_own_profiler_is_told_not_crashed(tmp_path):
    needs("torch")
    script = tmp_path / "selfprof.py"
    script.write_text("import torch\nwith torch.profiler.profile():\n"
                      "    torch.ones(3).sum()\nprint('unreachable')\n")
    r, out = _capture(tmp_path, "--", str(script))
    assert r.returncode == 2  # not a crash of the process (a signal): nothing recorded
    assert "starts torch.profiler itself" in r.stderr and "unreachable" not in r.stdout
    assert _traceviz_lines(r.stderr)[-1].startswith(
        "traceviz: selfprof.py exited with status 1 (RuntimeError: this code starts "
        "torch.profiler itself")
    _no_run_left(out)
