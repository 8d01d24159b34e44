"""`traceviz capture -- python SCRIPT` ends the script's whole process tree on every exit
of its own, SIGKILL included, keeps a profile written before the script crashed, and
says in one line, with its documented exit status, how the script ended: real captures
in subprocesses, real signals, real child processes (``sleep``, ``bash -c``, a
multiprocessing worker, a process in a session of its own, a double-forked daemon,
torchrun's ranks hung in a Gloo collective), real crashes.

Each script writes its processes' PIDs to a file; a PID is known with its start time
(``/proc/PID/stat``), so that a PID the system reuses is never taken for it. Whatever a
test's outcome, its processes are killed at its end (the ``leftovers`` fixture).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import needs

TRACEVIZ = [sys.executable, "-m", "traceviz"]
GONE_S = 10.0  # the watcher ends the tree within about 2 s; slack for a loaded machine

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="needs /proc (Linux)")

# children of every kind, their PIDs written to argv[1], then a wait until killed (or,
# with argv[2] == "return", the script returns and leaves them running)
KIDS = """
import multiprocessing, os, subprocess, sys, time

def worker():
    time.sleep(300)

if __name__ == "__main__":
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids = [subprocess.Popen(["sleep", "300"], **quiet).pid,
            subprocess.Popen(["bash", "-c", "sleep 300; true"], **quiet).pid]
    # a script that returns waits for a worker that is not a daemon, as Python does
    mp = multiprocessing.get_context("fork").Process(target=worker,
                                                     daemon=sys.argv[2] == "return")
    mp.start()
    pids.append(mp.pid)
    # a session of its own: out of the process group
    pids.append(subprocess.Popen(["sleep", "300"], start_new_session=True, **quiet).pid)
    # a daemon: a session of its own, and its parent gone at once
    code = ("import subprocess; print(subprocess.Popen(['sleep', '300'], "
            "start_new_session=True, stdout=subprocess.DEVNULL, "
            "stderr=subprocess.DEVNULL).pid)")
    pids.append(int(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                   text=True).stdout))
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(" ".join(map(str, pids)))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    if sys.argv[2] == "return":
        sys.exit(0)
    while True:
        time.sleep(0.1)
"""

# torchrun's ranks: a few steps with all-reduces, each rank's PID written to
# argv[1]/rank-N.pid, then rank 1 waits in an all-reduce that rank 0 never joins
HUNG_RANKS = """
import os, sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(2, 4)
for _ in range(6):
    model(x).sum().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
with open(f"{sys.argv[1]}/rank-{rank}.tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(f"{sys.argv[1]}/rank-{rank}.tmp", f"{sys.argv[1]}/rank-{rank}.pid")
if rank == 1:
    dist.all_reduce(torch.ones(1))
while True:
    time.sleep(0.1)
"""

# steps, then a crash: a segfault (ctypes) or os.abort(), after argv[2] steps
CRASH = """
import ctypes, os, sys
import torch
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(2, 4)
for step in range(int(sys.argv[2])):
    model(x).sum().backward()
    opt.step()
if sys.argv[1] == "abort":
    os.abort()
ctypes.string_at(0)
"""

# steps for a while: Ctrl-C lands while the runner starts up
STEPS = """
import time
import torch
model = torch.nn.Linear(4, 4)
x = torch.randn(2, 4)
for _ in range(1000):
    model(x).sum().backward()
    time.sleep(0.01)
"""


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot); None when it is gone (a
    zombie is gone: it runs nothing and holds nothing)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


class Leftovers:
    """The captures and processes a test started, killed at its end whatever happened."""

    def __init__(self) -> None:
        self.captures: list[subprocess.Popen] = []
        self.known: dict[int, int] = {}  # pid -> start time

    def know(self, pids: list[int]) -> None:
        for pid in pids:
            start = _start_time(pid)
            if start is not None:
                self.known[pid] = start

    def alive(self) -> list[int]:
        return sorted(pid for pid, start in self.known.items() if _start_time(pid) == start)

    def wait_gone(self, seconds: float = GONE_S) -> list[int]:
        deadline = time.monotonic() + seconds
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.alive()

    def kill_all(self) -> None:
        for proc in self.captures:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for pid in self.alive():
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def leftovers() -> Iterator[Leftovers]:
    left = Leftovers()
    yield left
    left.kill_all()


def _capture(tmp_path: Path, left: Leftovers, code: str, *args: str,
             options: tuple[str, ...] = ()) -> subprocess.Popen:
    """``traceviz capture OPTIONS --out RUN -- python SCRIPT ARGS`` in a session of its
    own (a Ctrl-C is SIGINT to its process group, as a terminal sends it); stdout and
    stderr go to files: a child that outlives it would hold a pipe open."""
    script = tmp_path / "script.py"
    script.write_text(code)
    # SIGINT as a terminal leaves it: a test runner's worker may ignore it, and a child
    # inherits an ignored SIGINT
    proc = subprocess.Popen(
        [*TRACEVIZ, "capture", *options, "--out", str(tmp_path / "run"), "--",
         sys.executable, str(script), *args], cwd=tmp_path, start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=open(tmp_path / "stdout", "w"),  # noqa: SIM115
        stderr=open(tmp_path / "stderr", "w"),  # noqa: SIM115
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    left.captures.append(proc)
    return proc


def _stderr(tmp_path: Path) -> str:
    return (tmp_path / "stderr").read_text()


def _wait_for(proc: subprocess.Popen, tmp_path: Path, ready: Callable[[], bool],
              seconds: float = 300.0) -> None:
    """Until ``ready()``, the capture still running."""
    deadline = time.monotonic() + seconds
    while not ready():
        assert proc.poll() is None, _stderr(tmp_path)
        assert time.monotonic() < deadline, _stderr(tmp_path)
        time.sleep(0.1)


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


@pytest.mark.capture
def test_sigkill_of_capture_ends_the_script_s_whole_tree(tmp_path, leftovers):
    needs("torch")
    pids = tmp_path / "pids"
    proc = _capture(tmp_path, leftovers, KIDS, str(pids), "run")
    _wait_for(proc, tmp_path, pids.exists)
    leftovers.know(_pids(pids))
    assert len(leftovers.alive()) == 5  # sleep, bash -c, worker, setsid, daemon
    watcher = _children(proc.pid, b"watcher.py")
    assert len(watcher) == 1
    leftovers.know(watcher)  # it ends the tree, then itself
    proc.kill()  # SIGKILL: no code of capture runs
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert leftovers.wait_gone() == []


@pytest.mark.capture
def test_script_that_returns_leaves_no_child_running(tmp_path, leftovers):
    needs("torch")
    pids = tmp_path / "pids"
    proc = _capture(tmp_path, leftovers, KIDS, str(pids), "return")
    _wait_for(proc, tmp_path, pids.exists)
    leftovers.know(_pids(pids))
    assert proc.wait(timeout=300) == 2  # it ran no framework op: nothing to analyze
    assert _stderr(tmp_path).strip().splitlines()[-1] == (
        "traceviz: script.py ended before it ran anything to profile: nothing recorded, no "
        "run folder left")
    assert leftovers.alive() == []  # ended before capture returned, not after


@pytest.mark.capture
def test_sigkill_of_a_ranks_capture_ends_a_rank_hung_in_a_collective(tmp_path, leftovers):
    needs("torch")
    folder = tmp_path / "pids"
    folder.mkdir()
    proc = _capture(tmp_path, leftovers, HUNG_RANKS, str(folder),
                    options=("--ranks", "2", "--warmup", "1", "--profile-steps", "2"))
    _wait_for(proc, tmp_path, lambda: len(list(folder.glob("*.pid"))) == 2)
    leftovers.know([int(p.read_text()) for p in folder.glob("*.pid")])
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert leftovers.wait_gone() == []


@pytest.mark.capture
def test_ctrl_c_on_a_hung_ranks_capture_is_130_and_keeps_the_profile(tmp_path, leftovers):
    needs("torch")
    folder = tmp_path / "pids"
    folder.mkdir()
    proc = _capture(tmp_path, leftovers, HUNG_RANKS, str(folder),
                    options=("--ranks", "2", "--warmup", "1", "--profile-steps", "2"))
    _wait_for(proc, tmp_path, lambda: len(list(folder.glob("*.pid"))) == 2)
    leftovers.know([int(p.read_text()) for p in folder.glob("*.pid")])
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    assert proc.wait(timeout=300) == 130, _stderr(tmp_path)
    notes = [line for line in _stderr(tmp_path).splitlines() if line.startswith("note:")]
    assert notes[-1] == "note: interrupted after the profiled steps; the run folder keeps them"
    assert sorted(p.name for p in (tmp_path / "run").glob("rank-*.pt.trace.json.gz")) == [
        "rank-0.pt.trace.json.gz", "rank-1.pt.trace.json.gz"]
    assert leftovers.alive() == []


@pytest.mark.capture
@pytest.mark.parametrize("how, steps, code, line", [
    ("segv", 8, 139, "note: script.py crashed (SIGSEGV) after its profile was written; the "
                     "run folder keeps the profile"),
    ("abort", 8, 134, "note: script.py crashed (SIGABRT) after its profile was written; the "
                      "run folder keeps the profile"),
    ("segv", 3, 2, "traceviz: error: script.py crashed (SIGSEGV) before its profile was "
                   "written: nothing recorded, no run folder left"),
], ids=["segfault", "abort", "segfault-before-the-profile"])
def test_a_crash_after_the_profile_keeps_it(tmp_path, leftovers, how, steps, code, line):
    needs("torch")
    # steps 2-3 profiled: written at the mark of step 4 (8 steps), never with 3
    proc = _capture(tmp_path, leftovers, CRASH, how, str(steps),
                    options=("--warmup", "1", "--profile-steps", "2"))
    assert proc.wait(timeout=300) == code, _stderr(tmp_path)
    err = _stderr(tmp_path)
    assert line in err.splitlines(), err
    assert "Traceback" not in err
    run = tmp_path / "run"
    if code == 2:
        assert not run.exists() and not list(tmp_path.glob(".run*"))
        return
    meta = json.loads((run / "meta.json").read_text())
    signum = code - 128
    assert (meta["exit_status"], meta["error"]) == (
        -signum, f"crashed ({signal.Signals(signum).name})")
    from traceviz import Trace

    trace = Trace.load(run / "trace.parquet")
    assert trace.meta["exit_status"] == -signum
    assert trace.summary()["steps"] == 2


def _children(parent: int, word: bytes) -> list[int]:
    """The children of ``parent`` with ``word`` in their command line."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            if int(stat[stat.rfind(")") + 2:].split()[1]) == parent \
                    and word in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _runner_imports_torch(capture: int) -> bool:
    """Whether the runner (``traceviz.runners.script``, a child of ``capture``) has
    loaded libtorch: it is starting its profiler, the script not yet run."""
    for pid in _children(capture, b"-m\0traceviz.runners.script"):
        try:
            return b"libtorch" in Path(f"/proc/{pid}/maps").read_bytes()
        except OSError:
            continue
    return False


@pytest.mark.capture
def test_ctrl_c_while_the_runner_starts_is_130_in_one_line(tmp_path, leftovers):
    needs("torch")
    proc = _capture(tmp_path, leftovers, STEPS)
    _wait_for(proc, tmp_path, lambda: _runner_imports_torch(proc.pid))
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130, _stderr(tmp_path)
    err = _stderr(tmp_path)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1] == (
        "traceviz: interrupted before it ran anything to profile: nothing recorded, no run "
        "folder left")
    assert not (tmp_path / "run").exists()


# the runner's way out, on its own: a child, a grandchild in a session of its own whose
# parent is gone (adopted by the subreaper), one that ignores SIGTERM, and multiprocessing's
# resource tracker (which ignores SIGTERM, and ends by itself once its parent is gone)
LEFTOVERS = """
import json, multiprocessing.resource_tracker as rt, os, signal, subprocess, sys, time
from traceviz.runners.script import end_leftovers, keep_orphans
keep_orphans()
quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
child = subprocess.Popen(["sleep", "300"], **quiet).pid
code = ("import subprocess; print(subprocess.Popen(['sleep', '300'], start_new_session=True,"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")
daemon = int(subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True).stdout)
stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                             "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                             "print(1, flush=True); time.sleep(300)"],
                            stdout=subprocess.PIPE)
stubborn.stdout.readline()  # its SIGTERM is ignored from here on
rt.ensure_running()
t = time.monotonic()
end_leftovers(grace_s=1.0)
took = time.monotonic() - t
def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
print(json.dumps({"gone": [not running(p) for p in (child, daemon, stubborn.pid)],
                  "tracker": running(rt._resource_tracker._pid), "took": took}))
"""


def test_the_runner_ends_what_the_script_left_but_multiprocessing_s_helpers(tmp_path):
    """``end_leftovers``: every process below the runner ends (SIGTERM; SIGKILL after the
    grace for one that ignores it), the detached daemon too, found through the subreaper;
    multiprocessing's resource tracker is left to end by itself, unlinking what was
    leaked, once the runner is gone."""
    r = subprocess.run([sys.executable, "-c", LEFTOVERS], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["gone"] == [True, True, True] and got["tracker"] is True
    assert 1.0 <= got["took"] < 1.9  # the stubborn one held it for the grace, no more
