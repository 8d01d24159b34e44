"""Sections computed in a forked child (``cli/apart.py``, ``system/forked.py``):
the figures are the ones computed in the command's own process, a child that fails or is
killed leaves them to that process, and only the ``traceviz`` process itself forks.

The forking runs in a fresh interpreter: a test worker has threads of its own (forking
it is not safe, and ``forked.may_fork`` says so)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import KINETO, SHARED_TRACES, shared
from traceviz.analyses.summary.registry import sections
from traceviz.system import forked
from traceviz.system.pools import usable_cores

SMALL = KINETO / "a100_diff_control.json.gz"
NSYS = SHARED_TRACES / "nsys" / "h100_2gpu_window.sqlite"

# summarize a trace twice: once with the apart sections from a child (what the child
# did is printed on stderr), once all here; print both --json objects
_BOTH = """
import json, os, signal, sys
from pathlib import Path
from traceviz.analyses import summarize
from traceviz.analyses.summary.registry import sections
from traceviz.cli.apart import compute_apart
from traceviz.parsers import load
from traceviz.system import forked
forked.allow()
trace = load(Path(sys.argv[1]))
first = summarize(trace, with_efficiency=True)
apart = compute_apart(first)
print(sorted(apart.keys) if apart else None, apart and apart.child.pid != os.getpid(),
      file=sys.stderr)
if sys.argv[2] == "kill":
    os.kill(apart.child.pid, signal.SIGKILL)
elif sys.argv[2] == "fail":  # the child's own computation fails: nothing comes back
    apart.child.stop()
    apart.child = forked.start(lambda: [1 / 0])
elif sys.argv[2] == "half":  # the child fails after its first two sections
    apart.child.stop()
    keys = sorted(apart.keys, key=[s.key for s in sections()].index)
    def produce():
        for key in keys[:2]:
            yield key, getattr(first, key)
        raise RuntimeError("halfway")
    apart.child = forked.start(produce)
a = first.to_dict()
print(sorted(apart.keys), apart.child.next(), file=sys.stderr)  # all taken, no more
b = summarize(load(Path(sys.argv[1])), with_efficiency=True).to_dict()
print(json.dumps([a, b], default=str))
"""


# a child stopped, then: reaped at once, and no value left to read
_REAPED = """
try:
    os.waitpid(child.pid, os.WNOHANG); print("still there")
except ChildProcessError:
    print("reaped")
print(child.next())
"""


def _both(trace, how: str = "") -> tuple[list, list[str]]:
    r = subprocess.run([sys.executable, "-c", _BOTH, str(shared(trace)), how],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout), r.stderr.splitlines()


@pytest.fixture(autouse=True)
def _two_cores():
    if usable_cores() < 2 or not sys.platform.startswith("linux"):
        pytest.skip("sections are computed apart on Linux with two cores or more")


APART = ["casts", "efficiency", "input_pipeline", "memory", "modules", "phases", "ranges",
          "step_windows"]


def test_the_apart_sections_are_the_registry_rows_that_say_so():
    """The sections the terminal prints after the header that read no other section:
    the header's own (the bound, the host split, launches) stay in the command."""
    assert sorted(s.key for s in sections() if s.apart) == APART


@pytest.mark.parametrize("trace", [SMALL, NSYS])
def test_sections_from_the_child_are_the_ones_computed_here(trace):
    """A Kineto and an nsys trace: the child computed the sections, the parent took
    them (none left, no more sent), and --json is the same, value for value."""
    (a, b), err = _both(trace)
    assert err[0] == f"{APART} True"
    assert err[1] == "[] (False, None)"
    assert a["efficiency"] and a["ranges"] and a == b


@pytest.mark.parametrize("how", ["kill", "fail", "half"])
def test_a_child_killed_or_failing_leaves_the_sections_to_this_process(how):
    """A child killed before it sent anything, whose computation raised, or that failed
    after sending two sections: the parent computes the rest itself, and the figures are
    the same."""
    (a, b), err = _both(SMALL, how)
    assert err[0] == f"{APART} True"
    assert a["efficiency"] and a == b


def test_no_fork_outside_the_command_or_beside_another_thread():
    """``main`` in a test's or a notebook's process (no ``allow``) never forks; nor does
    the command's process while another thread runs."""
    code = """
import threading, time
from traceviz.system import forked
print(forked.start(lambda: [1]))
forked.allow()
t = threading.Thread(target=time.sleep, args=(0.5,)); t.start()
print(forked.start(lambda: [1]))
t.join()
child = forked.start(lambda: [{"x": 1}])
print(child.next(), child.next(), child.next())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["None", "None", "(True, {'x': 1}) (False, None) (False, None)"]
    assert not forked._allowed  # this process (pytest) was never allowed


def test_each_value_comes_as_soon_as_it_is_computed():
    """The child's values come one by one, in order, whatever their size (a pickle
    larger than a pipe holds does not wait for the parent to read): the first one is
    read while the child still computes the second, and the child has written the big
    one before the parent reads anything."""
    code = """
import os, time
from traceviz.system import forked
forked.allow()
def produce():
    yield bytes(5 << 20)  # 5 MiB: more than a pipe holds
    yield "second"
    time.sleep(60)  # the parent reads the first two without waiting for this
    yield "never"
child = forked.start(produce)
time.sleep(1)
t = time.monotonic()
ok, big = child.next()
print(ok, len(big), big.count(0), child.next(), time.monotonic() - t < 10)
child.stop()
""" + _REAPED
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.splitlines()
    assert out == [f"True {5 << 20} {5 << 20} (True, 'second') True", "reaped",
                   "(False, None)"]


def test_a_stopped_child_is_killed_and_reaped():
    """``stop``: the child (blocked computing a value nobody reads) is gone at once."""
    code = """
import os, time
from traceviz.system import forked
forked.allow()
child = forked.start(lambda: [time.sleep(60)])
child.stop()
""" + _REAPED
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=30).stdout.splitlines()
    assert out == ["reaped", "(False, None)"]


# ``traceviz analyze`` as the console script runs it, saying whether it forked
_CLI = """
import sys
from traceviz.system import forked
real = forked.start
def start(fn):
    child = real(fn)
    print("forked", child is not None, file=sys.stderr)
    return child
forked.start = start
sys.argv = ["traceviz", *sys.argv[1:]]
from traceviz.entry import entry
entry()
"""


def test_analyze_forks_and_prints_what_main_prints(capsys):
    """The ``traceviz`` process computes the sections apart; its --json and its terminal
    text are what ``main`` prints in this process, which does not fork."""
    from traceviz.cli import main

    for extra in (["--json"], ["--width", "120"]):
        r = subprocess.run([sys.executable, "-c", _CLI, "analyze", str(shared(SMALL)),
                            *extra], capture_output=True, text=True, check=True,
                           env={**os.environ, "COLUMNS": "120"})
        assert r.stderr.split() == ["forked", "True"]
        assert main(["analyze", str(shared(SMALL)), *extra]) == 0
        assert capsys.readouterr().out == r.stdout


# the console script's own run, naming its child on stderr first
_SAYS_CHILD = """
import sys
from traceviz.system import forked
real = forked.start
def start(fn):
    child = real(fn)
    print("child", child.pid, file=sys.stderr, flush=True)
    return child
forked.start = start
"""
_ENTRY = """
sys.argv = ["traceviz", *sys.argv[1:]]
from traceviz.entry import entry
entry()
"""

# the command interrupted while its child computes: the take waits so that Ctrl-C lands
# in the command's own computing, the child alive
_INTERRUPTED = _SAYS_CHILD + """
import time
from traceviz.cli import apart
real_take = apart.Apart.take
def take(self, key):
    time.sleep(30)
    return real_take(self, key)
apart.Apart.take = take
""" + _ENTRY


def test_ctrl_c_ends_the_command_and_its_child():
    """Ctrl-C while the child computes: one line, exit 130, and no child left behind."""
    import signal
    import time

    # SIGINT as a terminal leaves it: a child inherits a test worker's ignored SIGINT
    p = subprocess.Popen([sys.executable, "-c", _INTERRUPTED, "analyze",
                          str(shared(SMALL))], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = p.stderr.readline().split()
    assert first[0] == "child", first
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and err.strip() == "traceviz: interrupted"
    with pytest.raises(ProcessLookupError):
        os.kill(int(first[1]), 0)


def test_a_reader_that_stops_early_ends_the_command_quietly():
    """``traceviz analyze T | head -n 2``: the sections print as they come, so the pipe
    breaks while the command still prints (and its child may still compute); the command
    ends with status 0 and nothing on stderr, as on any broken pipe, and leaves no child.
    Rich's own handler exited with status 1."""
    p = subprocess.Popen([sys.executable, "-c", _SAYS_CHILD + _ENTRY, "analyze",
                          str(shared(SMALL))],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, "COLUMNS": "120"})
    assert p.stdout is not None
    first = p.stdout.readline()
    p.stdout.close()  # the reader goes away after one line
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0, err
    assert first.startswith(b"source") and err.split()[0] == "child", err
    assert len(err.splitlines()) == 1, err  # no message, no traceback
    with pytest.raises(ProcessLookupError):
        os.kill(int(err.split()[1]), 0)
