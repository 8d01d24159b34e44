"""The cyclic garbage collector paused for a command's imports: in the ``traceviz``
process, far fewer collections before the trace is read; from the read on, the import's
objects frozen, the collector stays off to the end for a small trace and runs again for a
larger one; a caller of ``main`` in its own process (a test, a notebook) keeps its
collector as it was, even when the command fails early."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import subprocess
import sys

import pytest

from tests.conftest import KINETO, shared
from traceviz.cli import main

SMALL = KINETO / "a100_diff_control.json.gz"

# the command run as the console script runs it (entry), counting the collections made
# before the trace is read and noting the collector's state when the read starts
_COUNTED = """
import gc, json, sys
import traceviz.cli.base as base
from traceviz.system import collector
if sys.argv[1] == "large":  # every trace above the bound: the collector runs after the read
    collector.SMALL_BYTES = 0
elif sys.argv[1] == "many":  # every trace of more rows than a small one holds
    collector.SMALL_ROWS = 10
seen = {"before_read": 0, "after_read": 0, "after_command": 0, "enabled_at_read": None,
        "frozen_at_read": 0}
counting = ["before_read"]
def cb(phase, info):
    if phase == "start":
        seen[counting[0]] += 1
gc.callbacks.append(cb)
real = base.load_with_progress
def load(*a, **k):
    out = real(*a, **k)
    counting[0] = "after_read"
    seen["enabled_at_read"] = gc.isenabled()
    seen["frozen_at_read"] = gc.get_freeze_count()
    return out
base.load_with_progress = load
import traceviz.cli.analyze as analyze
analyze.load_with_progress = load
import traceviz.cli as cli
command = cli.main
def main(*a, **k):
    try:
        return command(*a, **k)
    finally:  # the command is done: the collector is its usual self again
        counting[0] = "after_command"
cli.main = main
import atexit
atexit.register(lambda: print(json.dumps(seen), file=sys.stderr))
sys.argv = ["traceviz", *sys.argv[2:]]
from traceviz.entry import entry
entry()
"""


def _counted(size: str, *args: str) -> dict:
    err = subprocess.run([sys.executable, "-c", _COUNTED, size, *args], capture_output=True,
                         text=True, check=True).stderr
    return json.loads(err.strip().splitlines()[-1])


def _collections_importing_pandas() -> int:
    return int(subprocess.run(
        [sys.executable, "-c", "import gc; n = [0]\n"
         "gc.callbacks.append(lambda p, i: n.__setitem__(0, n[0] + (p == 'start')))\n"
         "import pandas; print(n[0])"], capture_output=True, text=True, check=True).stdout)


def test_a_small_trace_s_command_collects_only_before_the_console_script_starts():
    """Importing pandas alone makes ~150 collections; the console script pauses the
    collector first thing (its own imports, rich and argparse, then the command's), so
    only the interpreter's start collects; a small trace (1.8 MB gzipped) is read and
    analyzed with the collector off, the imports' objects frozen."""
    paused = _counted("small", "analyze", str(shared(SMALL)))
    assert paused["enabled_at_read"] is False
    assert paused["frozen_at_read"] > 50_000
    assert paused["after_read"] == 0
    assert paused["before_read"] * 10 < _collections_importing_pandas()


@pytest.mark.parametrize("bound", ["large", "many"])
def test_a_larger_trace_s_command_collects_as_usual_after_the_read(bound):
    """Above ``SMALL_BYTES`` as read (set to 0 here: every trace), or a file within it
    that held more than ``SMALL_ROWS`` rows (a Parquet file of 59 MB holds 6.8M; set to
    10 here), the collector runs again from the read on, the imports' objects frozen out
    of its scans."""
    counted = _counted(bound, "analyze", str(shared(SMALL)))
    assert counted["enabled_at_read"] is True
    assert counted["frozen_at_read"] > 50_000
    assert counted["after_read"] > 0
    assert counted["before_read"] * 10 < _collections_importing_pandas()


def test_main_in_a_process_of_its_own_leaves_the_collector_alone(tmp_path):
    """``main`` called in this process: the collector is never paused nor frozen, after a
    run and after a command that fails before reading its trace."""
    frozen = gc.get_freeze_count()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["analyze", str(shared(SMALL)), "--json"]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    (tmp_path / "x.json").write_text("{}")
    assert main(["analyze", str(tmp_path / "x.json"), "--top", "0"]) == 2
    assert main(["analyze", str(tmp_path / "x.json")]) == 2
    assert gc.isenabled() and gc.get_freeze_count() == frozen
