"""The cyclic garbage collector paused for a command's imports: in the ``traceviz``
process, far fewer collections before the trace is read, the collector running again
from the read on (the import's objects frozen); a caller of ``main`` in its own process
(a test, a notebook) keeps its collector as it was, even when the command fails early."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import subprocess
import sys

from tests.conftest import KINETO, shared
from traceviz.cli import main

SMALL = KINETO / "a100_diff_control.json.gz"

# the command run as the console script runs it (entry), counting the collections made
# before the trace is read and noting the collector's state when the read starts
_COUNTED = """
import gc, json, sys
import traceviz.cli.base as base
seen = {"before_read": 0, "enabled_at_read": None, "frozen_at_read": 0}
counting = [True]
def cb(phase, info):
    if phase == "start" and counting[0]:
        seen["before_read"] += 1
gc.callbacks.append(cb)
real = base.load_with_progress
def load(*a, **k):
    out = real(*a, **k)
    counting[0] = False
    seen["enabled_at_read"] = gc.isenabled()
    seen["frozen_at_read"] = gc.get_freeze_count()
    print(json.dumps(seen), file=sys.stderr)
    return out
base.load_with_progress = load
import traceviz.cli.analyze as analyze
analyze.load_with_progress = load
sys.argv = ["traceviz", *sys.argv[1:]]
from traceviz.entry import entry
entry()
"""


def _counted(*args: str) -> dict:
    err = subprocess.run([sys.executable, "-c", _COUNTED, *args], capture_output=True,
                         text=True, check=True).stderr
    return json.loads(err.strip().splitlines()[-1])


def test_the_command_collects_little_before_the_read_and_as_usual_after():
    """Importing pandas alone makes ~150 collections; the paused command, from start to
    the read, only those of the console script's own start (rich, argparse); once the
    read starts the collector runs, the import's objects frozen out of its scans."""
    paused = _counted("analyze", str(shared(SMALL)))
    assert paused["enabled_at_read"] is True
    assert paused["frozen_at_read"] > 50_000
    baseline = subprocess.run(
        [sys.executable, "-c", "import gc; n = [0]\n"
         "gc.callbacks.append(lambda p, i: n.__setitem__(0, n[0] + (p == 'start')))\n"
         "import pandas; print(n[0])"], capture_output=True, text=True, check=True)
    assert paused["before_read"] * 2 < int(baseline.stdout)


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
