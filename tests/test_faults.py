"""Faults during a real import: signals, a killed process, a full disk, two writers.

Each run is the real ``traceviz`` entry point in a subprocess, importing a Kineto trace
of about 160 MB with two decode worker processes (``TRACEVIZ_IMPORT_WORKERS``; the Python
reader, ``TRACEVIZ_READER=python``: the compiled one decodes on threads, tested once here
too). Whatever happens, no partial output appears under the output's name, no worker
outlives its parent, and the next run works.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import KINETO, shared
from traceviz.trace import Trace

TRACEVIZ = [sys.executable, "-m", "traceviz"]


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory) -> Path:
    """v100_19k's events three times over: ~160 MB, a few seconds to import."""
    raw = gzip.decompress(shared(KINETO / "v100_19k_kernels.json.gz").read_bytes())
    start = raw.index(b"[", raw.index(b'"traceEvents"')) + 1
    end = raw.rindex(b"]")
    body = raw[start:end].strip()
    path = tmp_path_factory.mktemp("big") / "big.json"
    with open(path, "wb") as f:
        f.write(raw[:start])
        f.write(body)
        for _ in range(2):
            f.write(b",\n")
            f.write(body)
        f.write(raw[end:])
    assert path.stat().st_size > 100 << 20
    return path


def _start(args: list[str], tag: str, reader: str = "python", **kw) -> subprocess.Popen:
    # two decode workers even at this size, so that their clean-up is what is tested
    env = {**os.environ, "TRACEVIZ_FAULT_TAG": tag, "TRACEVIZ_IMPORT_WORKERS": "2",
           "TRACEVIZ_READER": reader}
    # SIGINT as a terminal leaves it: a test runner's worker may ignore it, and a child
    # inherits an ignored SIGINT (Python then installs no KeyboardInterrupt handler)
    kw.setdefault("preexec_fn", lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return subprocess.Popen([*TRACEVIZ, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def _wait_caught(pid: int, sig: int, seconds: float = 30.0) -> None:
    """Until process ``pid`` has a handler for ``sig`` (its SigCgt mask in /proc)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return  # it has ended: the test's assertions say how
        caught = next(int(line.split()[1], 16) for line in status.splitlines()
                      if line.startswith("SigCgt:"))
        if caught >> (sig - 1) & 1:
            return
        time.sleep(0.005)
    raise AssertionError(f"process {pid} caught no signal {sig} within {seconds} s")


def _tagged(tag: str) -> list[int]:
    """Processes (the CLI, its decode workers, their forkserver) carrying ``tag``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"TRACEVIZ_FAULT_TAG={tag}".encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _wait_gone(tag: str, seconds: float = 10.0) -> list[int]:
    deadline = time.time() + seconds
    while time.time() < deadline:
        alive = _tagged(tag)
        if not alive:
            return []
        time.sleep(0.2)
    return _tagged(tag)


def _wait_for_workers(proc: subprocess.Popen, tag: str, seconds: float = 30.0) -> None:
    """Until the decode workers run (the CLI, its fork server, two workers)."""
    deadline = time.time() + seconds
    while time.time() < deadline and proc.poll() is None and len(_tagged(tag)) < 4:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    assert len(_tagged(tag)) >= 4


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated")])
def test_signal_during_decode(big_trace, tmp_path, sig, code, word):
    out = tmp_path / "out.parquet"
    for _ in range(3):
        tag = uuid.uuid4().hex
        proc = _start(["import", str(big_trace), "-o", str(out)], tag)
        _wait_for_workers(proc, tag)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        # on a loaded machine the import can finish before the signal lands: then it is
        # not the case under test (the import wrote its file whole); try again
        if proc.returncode != 0:
            break
        assert out.exists() and _leftovers(tmp_path) == []
        out.unlink()
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1] == f"traceviz: {word}"
    assert "Traceback" not in err
    assert not out.exists() and _leftovers(tmp_path) == []
    assert _wait_gone(tag) == []


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc (Linux)")
def test_ctrl_c_during_a_threaded_decode(big_trace, tmp_path):
    """The compiled reader's decode threads: Ctrl-C while they read ends the import with
    one line and exit 130, no output, nothing left."""
    from traceviz.parsers.kineto import native

    if native.reader() != "native":
        pytest.skip("the compiled Kineto reader is not built here")
    out = tmp_path / "out.parquet"
    for _ in range(3):
        proc = _start(["import", str(big_trace), "-o", str(out)], uuid.uuid4().hex, "native")
        _wait_reading(proc.pid, 40 << 20)  # the threads are reading the pieces
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        if proc.returncode != 0:  # else it finished before the signal landed: again
            break
        out.unlink()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "traceviz: interrupted" and "Traceback" not in err
    assert not out.exists() and _leftovers(tmp_path) == []


def _wait_reading(pid: int, nbytes: int, seconds: float = 30.0) -> None:
    """Until process ``pid`` has read ``nbytes`` (``rchar`` in /proc: the decode is on)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            io = Path(f"/proc/{pid}/io").read_text()
        except OSError:
            return
        if int(next(li for li in io.splitlines() if li.startswith("rchar:")).split()[1]) \
                >= nbytes:
            return
        time.sleep(0.01)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_sigkill_leaves_no_process_and_no_output(big_trace, tmp_path):
    out = tmp_path / "out.parquet"
    tag = uuid.uuid4().hex
    proc = _start(["import", str(big_trace), "-o", str(out)], tag)
    _wait_for_workers(proc, tag)
    proc.kill()
    proc.communicate(timeout=30)
    # the workers die with their parent (PR_SET_PDEATHSIG), the forkserver sees it go
    assert _wait_gone(tag) == []
    assert not out.exists()  # at most a hidden .out.parquet.*.tmp remains (docs/failures.md)
    # and the next run works, beside whatever the killed one left
    done = subprocess.run([*TRACEVIZ, "import", str(big_trace), "-o", str(out)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRACEVIZ_IMPORT_WORKERS": "2",
                               "TRACEVIZ_READER": "python"})
    assert done.returncode == 0, done.stderr
    assert len(Trace.load(out).events) > 0


SEMAPHORE_LEFT_REGISTERED = """
import multiprocessing, os, sys
import _multiprocessing
from traceviz.system.pools import quiet_resource_tracker
if sys.argv[1] == "quiet":
    quiet_resource_tracker()
lock = multiprocessing.get_context("forkserver").Lock()  # registered with the tracker
# unlinked but never unregistered, as when a Ctrl-C cuts the exit clean-up short
_multiprocessing.sem_unlink(lock._semlock.name)
print("traceviz: interrupted", file=sys.stderr, flush=True)
os._exit(130)
"""


def test_the_resource_tracker_adds_no_lines_after_interrupted():
    """multiprocessing's resource tracker outlives the CLI by a moment and warns about each
    semaphore it cleans up, on the CLI's stderr: two warnings after "traceviz: interrupted"
    (CI, once, in test_early_ctrl_c_is_one_line). The decode pool starts it with its stderr
    on /dev/null; started as usual, it prints them (the first run shows the case is real)."""
    runs = {mode: subprocess.run([sys.executable, "-c", SEMAPHORE_LEFT_REGISTERED, mode],
                                 capture_output=True, text=True, timeout=60)
            for mode in ("loud", "quiet")}
    assert "No such file or directory" in runs["loud"].stderr
    assert runs["quiet"].returncode == 130
    assert runs["quiet"].stderr == "traceviz: interrupted\n"


# entry() around a command interrupted while a worker thread is still running; the
# thread then fails as the decode pool's management thread did in CI ("Exception in
# thread Thread-1: ... OSError: [Errno 9] Bad file descriptor" after "interrupted")
_THREAD_FAILS_AFTER_INTERRUPT = """
import sys, threading, time
import traceviz.cli

def main(argv=None):
    def manager():
        time.sleep(0.3)
        raise OSError(9, "Bad file descriptor")
    threading.Thread(target=manager).start()
    if sys.argv[1] == "main-says-it":  # cli.main catches the KeyboardInterrupt and says so
        print("traceviz: interrupted", file=sys.stderr)
        return 130
    raise KeyboardInterrupt

traceviz.cli.main = main
from traceviz.entry import _leave
import traceviz.entry as e
e._leave = lambda code: (time.sleep(0.6), _leave(code))  # the thread fails before the exit
e.entry()
"""


@pytest.mark.parametrize("who", ["entry-says-it", "main-says-it"])
def test_a_thread_failing_after_interrupted_adds_no_lines(who):
    """Whichever of entry() and cli.main catches the interruption (main did in CI's second
    case: a Ctrl-C during analyze), a thread failing afterwards prints nothing."""
    r = subprocess.run([sys.executable, "-c", _THREAD_FAILS_AFTER_INTERRUPT, who],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 130
    assert r.stderr == "traceviz: interrupted\n", r.stderr


@pytest.mark.parametrize("delay", [0.25, 0.4, 0.7, 1.0])
def test_early_ctrl_c_is_one_line(tmp_path, delay):
    """Ctrl-C while Python is still importing pandas and friends: no traceback. (Before
    the interpreter has run any traceviz code, in its first ~50 ms, Python's own start-up
    answers a Ctrl-C as it always does.)"""
    tag = uuid.uuid4().hex
    proc = _start(["analyze", str(shared(KINETO / "v100_19k_kernels.json.gz"))], tag)
    # the delay counts from traceviz's entry (its SIGTERM handler in place): on a loaded
    # machine the interpreter's own start-up alone can take longer than the delay
    _wait_caught(proc.pid, signal.SIGTERM)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (130, 0), err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    if proc.returncode == 130:
        assert err.strip().splitlines()[-1] == "traceviz: interrupted"


# entry() around a command that has done its work, with a signal sent to itself while the
# interpreter shuts down: from an exit callback, or from an object torn down with the
# modules, after the interpreter has put its signal handlers back to the defaults (as
# late as a user's Ctrl-C or a job scheduler's SIGTERM can land)
_LATE_SIGNAL = """
import atexit, os, signal, sys, time
import traceviz.cli

def main(argv=None):
    print("the work's output")
    return 0

class Late:
    def __del__(self, kill=os.kill, pid=os.getpid(), sig=signal.{sig}, sleep=time.sleep):
        kill(pid, sig)
        sleep(0.5)

traceviz.cli.main = main
if "{when}" == "atexit":
    atexit.register(lambda: (os.kill(os.getpid(), signal.{sig}), time.sleep(0.5)))
else:
    traceviz.cli.late = Late()
from traceviz.entry import entry
entry()
"""


@pytest.mark.parametrize("when", ["atexit", "teardown"])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_signal_during_shutdown_keeps_the_work_s_status(sig, when):
    """A Ctrl-C or SIGTERM after the work is done has nothing to stop: the work's exit
    status and output, no traceback (it printed KeyboardInterrupt from the shutdown, or
    died by the signal, and once hung CI's interpreter; a SIGTERM in the modules'
    teardown exited 143 with the output complete)."""
    r = subprocess.run([sys.executable, "-c", _LATE_SIGNAL.format(sig=sig, when=when)],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "the work's output\n"), r.stderr
    assert "Traceback" not in r.stderr and "Exception" not in r.stderr, r.stderr


_STUCK_QUEUE = """
import multiprocessing, os, signal, threading
import traceviz.cli

def main(argv=None):
    q = multiprocessing.Queue()
    q.put(b"x" * (8 << 20))  # no reader: its feeder thread blocks in the pipe for good
    # a second Ctrl-C, while the clean-up waits
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    raise KeyboardInterrupt

traceviz.cli.main = main
from traceviz.entry import entry
entry()
"""


def test_interrupt_leaves_even_with_a_stuck_queue():
    """Ctrl-C's exit releases multiprocessing's resources, whose finalizers join each
    queue's feeder thread; one stuck writing into a killed worker's pipe hung the CLI after
    "traceviz: interrupted" (CI, test_early_ctrl_c_is_one_line). The wait is bounded, and a
    second Ctrl-C meanwhile prints nothing more."""
    started = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _STUCK_QUEUE], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 130 and r.stderr == "traceviz: interrupted\n", r.stderr
    assert time.perf_counter() - started < 30


def _slow_rank(i: int) -> int:
    time.sleep(0.5)
    return i


def test_rank_pool_stops_at_once():
    """Ctrl-C, a failed rank or an abandoned analysis stops the rank workers at once: the
    pool's own exit waited for every queued rank (40 x 0.5 s over 2 workers: 10 s)."""
    import multiprocessing

    from traceviz.rankset.folder import _pool_map

    results = _pool_map(_slow_rank, 2)([(i,) for i in range(40)])
    assert next(results)[1] in range(40)
    started = time.perf_counter()
    results.close()  # what an exception propagating through the consumer does
    assert time.perf_counter() - started < 3
    deadline = time.time() + 5
    while multiprocessing.active_children() and time.time() < deadline:
        time.sleep(0.1)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("delay", [1.0, 3.0, 5.0, 7.0])
def test_signal_at_any_moment_leaves_nothing_half_written(big_trace, tmp_path, delay):
    """Interrupt at several moments (decode, normalize, write): either the output is
    complete and readable, or it does not exist; never a temporary file."""
    out = tmp_path / "out.parquet"
    proc = _start(["import", str(big_trace), "-o", str(out)], uuid.uuid4().hex)
    time.sleep(delay)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    # -15: the signal came after the work, while the interpreter was shutting down (it
    # restores the default handlers): the output is complete then
    assert proc.returncode in (0, 143, -signal.SIGTERM), err
    assert "Traceback" not in err
    # 143 with an output: the signal came between the rename into place and the exit
    if proc.returncode != 143 or out.exists():
        assert len(Trace.load(out).events) > 0
    assert _leftovers(tmp_path) == []


def test_two_writers_one_output(tmp_path):
    """Two imports to one path without --force: one writes it, the other fails cleanly
    (the final name is created by a hard link, which fails once the name exists)."""
    src = shared(KINETO / "a100_diff_control.json.gz")
    out = tmp_path / "out.parquet"
    procs = [_start(["import", str(src), "-o", str(out)], uuid.uuid4().hex) for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], results
    loser = next(err for p, (_, err) in zip(procs, results, strict=True) if p.returncode == 2)
    assert "already exists" in loser and len(loser.strip().splitlines()) == 1
    assert len(Trace.load(out).events) > 0
    assert _leftovers(tmp_path) == []


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs (needs root and mount rights; skipped otherwise)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_disk_full_names_the_path_and_keeps_the_old_file(small_disk):
    src = shared(KINETO / "a100_diff_control.json.gz")  # its table is ~1 MB: does not fit
    out = small_disk / "out.parquet"
    out.write_bytes(b"the user's earlier output")
    done = subprocess.run([*TRACEVIZ, "import", str(src), "-o", str(out), "--force"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "No space left" in lines[0]
    assert out.read_bytes() == b"the user's earlier output"
    assert sorted(p.name for p in small_disk.iterdir()) == ["out.parquet"]


_LOST_INTERRUPT = """
import signal, sys, time, weakref
from traceviz import entry as e
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.unraisablehook = e._redeliver_interrupt
class Lock: pass
lock = Lock()
def clean_up(_):  # as importlib's module-lock clean-up when a Ctrl-C lands in it
    raise KeyboardInterrupt
ref = weakref.ref(lock, clean_up)
try:
    del lock
    time.sleep(5)
    print("ran on")
except KeyboardInterrupt:
    print("interrupted")
"""


def test_a_ctrl_c_landing_in_a_clean_up_callback_still_interrupts():
    """A KeyboardInterrupt raised where the interpreter cannot raise it (a weakref
    callback: importlib's module-lock clean-up, while decode threads import) is sent
    again to the command, not printed as "Exception ignored" and lost."""
    r = subprocess.run([sys.executable, "-c", _LOST_INTERRUPT], capture_output=True,
                       text=True, timeout=60)
    assert r.stdout.strip() == "interrupted", r.stdout + r.stderr
    assert "Exception ignored" not in r.stderr and "Traceback" not in r.stderr, r.stderr
