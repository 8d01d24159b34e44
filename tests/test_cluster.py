"""A real two-node Ray cluster on loopback (issue 16): a 4-point CPU sweep and an 8-rank
import as Ray tasks, and a node killed mid-sweep: its point is recorded failed with the
reason, the rest done, and --resume completes it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.rankgen import make_ranks
from tests.conftest import KINETO, missing, needs, shared

needs("torch")
pytestmark = pytest.mark.capture  # real captures, on Ray

RAY = Path(sys.executable).with_name("ray")
SWEEP = ["sweep", "--models", "cudnn_torch,fine_torch", "--batch", "2,4", "--hidden", "8",
         "--seq", "4", "--layers", "1", "--warmup", "1", "--max-warmup", "3", "--steps", "2",
         "--profile-steps", "1", "--device", "cpu"]
# node death noticed within about 2 s instead of the default 30
HEALTH = {"RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
          "RAY_health_check_failure_threshold": "3", "RAY_health_check_initial_delay_ms": "0"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Ray reads ~/.ray (an auth token there turns token authentication on): the cluster and
# its drivers get a HOME of their own, so the test does not depend on the user's
RAY_ENV = dict(os.environ)


def _ray(*args: str, env: dict | None = None) -> None:
    r = subprocess.run([str(RAY), *args], capture_output=True, text=True, timeout=180,
                       env={**RAY_ENV, **(env or {})})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def _raylet_pid(node_manager_port: int) -> int:
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"raylet") and \
                f"--node_manager_port={node_manager_port}".encode() in cmd:
            return int(proc.name)
    raise AssertionError(f"no raylet on port {node_manager_port}")


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(proc.name))
    return kids


def _kill_node(raylet: int) -> None:
    """A node dies with all its processes: the raylet, its workers and their runner
    subprocesses. Killing the raylet alone left a race: a worker notices its raylet's death
    only on its next check (about a second), and a point that finished meanwhile reached
    the driver as done (CI, once, under load). The tree is stopped first, until no new
    process appears in it, so that none started meanwhile is left running."""
    stopped: set[int] = set()
    while True:
        kids, todo, tree = _children(), [raylet], []
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(kids.get(pid, []))
        new = [pid for pid in tree if pid not in stopped]
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped.update(new)
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _running_point(raylet: int) -> bool:
    """Whether a worker process of this raylet runs a sweep point: Ray titles a worker
    process after the task it executes (``ray::capture_point``)."""
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == raylet and \
                cmd.startswith(b"ray::capture_point"):
            return True
    return False


def _stop_cluster(temp_dir: Path) -> None:
    """Stop this cluster's processes only: every process whose command line names its own
    temporary folder, and their children (``ray stop`` would stop every Ray process on the
    machine, another test suite's cluster included)."""
    mark = str(temp_dir).encode()
    for _ in range(3):
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                if mark in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                continue
        if not pids:
            return
        kids = _children()  # the raylet's agents retitle themselves: found as its children
        todo = list(pids)
        while todo:
            kid = kids.get(todo.pop(), [])
            pids += kid
            todo += kid
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not RAY.exists():
        missing("Ray is not installed: pip install -e '.[dist]' (in .[test])")
    RAY_ENV["HOME"] = str(tmp_path_factory.mktemp("home"))
    # a folder of its own (short: Ray's socket paths must fit 107 bytes)
    temp_dir = Path(tempfile.mkdtemp(prefix="tvray-"))
    port, worker_port = _free_port(), _free_port()
    common = ["--num-cpus", "1", "--object-store-memory", str(80 << 20),
              "--disable-usage-stats", "--temp-dir", str(temp_dir)]
    try:
        _ray("start", "--head", "--port", str(port), "--include-dashboard", "false",
             *common, env=HEALTH)
        address = f"127.0.0.1:{port}"
        _ray("start", "--address", address, "--node-manager-port", str(worker_port),
             *common)
        yield address, worker_port
    finally:
        _stop_cluster(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _nodes_alive(address: str) -> int:
    code = (f"import ray; ray.init(address={address!r}, logging_level='ERROR', "
            "log_to_driver=False); print(sum(n['Alive'] for n in ray.nodes()))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=RAY_ENV)
    return int(r.stdout.strip().splitlines()[-1])


def test_sweep_on_two_nodes(cluster, tmp_path):
    address, _ = cluster
    assert _nodes_alive(address) == 2
    out = tmp_path / "sweep"
    r = subprocess.run([sys.executable, "-m", "traceviz", *SWEEP, "--out", str(out),
                        "--ray", address], capture_output=True, text=True, timeout=600, env=RAY_ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    df = pd.read_parquet(out / "sweep.parquet")
    assert list(df["point"]) == ["cudnn_torch-b2-h8-s4-fp32", "cudnn_torch-b4-h8-s4-fp32",
                                 "fine_torch-b2-h8-s4-fp32", "fine_torch-b4-h8-s4-fp32"]
    assert (df["status"] == "ok").all()
    for row in df.itertuples():
        bench = json.loads((Path(row.run_dir) / "bench.json").read_text())
        assert bench["time_per_batch_s"]["median"] == row.time_per_batch_s
        assert bench["batches"] == 2


def test_rank_import_on_two_nodes(cluster, tmp_path, capsys):
    from traceviz.cli import main

    address, _ = cluster
    folder = tmp_path / "ranks"
    make_ranks([shared(KINETO / "ampere_sampled_rank0.json.gz"),
                shared(KINETO / "ampere_sampled_rank1.json.gz")], 8, folder)
    ds = tmp_path / "ds"
    r = subprocess.run([sys.executable, "-m", "traceviz", "import", str(folder), "-o", str(ds),
                        "--ray", address], capture_output=True, text=True, timeout=600, env=RAY_ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.name for p in ds.glob("rank=*")) == sorted(f"rank={k}" for k in range(8))
    assert main(["analyze", str(ds), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"] == data["ranks"]


def test_node_killed_mid_sweep_then_resume(cluster, tmp_path):
    """The worker node dies while it captures a point: that point is failed with the
    reason, the other three are done (the head takes them), and --resume completes it."""
    address, worker_port = cluster
    out = tmp_path / "sweep"
    proc = subprocess.Popen([sys.executable, "-m", "traceviz", *SWEEP, "--out", str(out),
                             "--ray", address], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=RAY_ENV)
    table = out / "sweep.parquet"
    raylet = _raylet_pid(worker_port)
    deadline = time.time() + 300
    while not _running_point(raylet):  # a worker of that node is inside capture_point
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    _kill_node(raylet)
    _, err = proc.communicate(timeout=600)
    df = pd.read_parquet(table).set_index("point")
    failed = df[df["status"] == "failed"]
    assert len(failed) == 1 and (df["status"] == "ok").sum() == 3, err[-3000:]
    reason = failed["error"].iloc[0]
    assert any(w in reason for w in ("Died", "died", "Crashed", "crashed", "Unavailable",
                                     "Lost", "lost")), reason
    assert proc.returncode == 0  # points were captured; the failure is in the table
    r = subprocess.run([sys.executable, "-m", "traceviz", *SWEEP, "--out", str(out),
                        "--ray", address, "--resume"], capture_output=True, text=True,
                       timeout=600, env=RAY_ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    df = pd.read_parquet(table)
    assert len(df) == 4 and (df["status"] == "ok").all()


def test_run_folder_shipped_back_when_the_worker_does_not_see_it(tmp_path):
    """A worker that does not see --out (its marker holds another token) captures into a
    temporary folder and returns it in the row; the driver puts it in place."""
    from traceviz.capture.grid import MARKER, SweepSpec, capture_point, unpack_point

    out = tmp_path / "sweep"
    out.mkdir()
    (out / MARKER).write_text("the driver's token")
    spec = SweepSpec(models=["fine_torch"], batches=[2], hiddens=[8], seqs=[4], amps=[None],
                     layers=1, warmup=1, max_warmup=3, steps=2, profile_steps=1)
    point = spec.points()[0]
    row = capture_point(point, spec, str(out), "a worker elsewhere")
    assert row["status"] == "ok" and isinstance(row.get("_archive"), bytes)
    assert not (out / "points").exists()  # nothing written where the worker cannot see
    row = unpack_point(row, out)
    run = Path(row["run_dir"])
    assert "_archive" not in row and run == out / "points" / "fine_torch-b2-h8-s4-fp32"
    bench = json.loads((run / "bench.json").read_text())
    assert bench["time_per_batch_s"]["median"] == row["time_per_batch_s"]
    assert (run / "trace.parquet").is_file()
