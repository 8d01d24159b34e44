"""Process pools: how workers are started, and a worker's abrupt death worded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import traceviz
from benchmarks.rankgen import PAIR, make_ranks
from tests.conftest import KINETO, shared
from traceviz.cli import main
from traceviz.errors import TraceVizError
from traceviz.rankset.folder import _pool_map

CHECK = """
import threading
from traceviz.system.pools import fork_is_safe
first = fork_is_safe()
t = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
t.start()
with_thread = fork_is_safe()
import duckdb
duckdb.connect().execute("SELECT 1")
print(first, with_thread, fork_is_safe())
"""


def test_fork_is_safe_only_without_other_threads_and_duckdb():
    """A fresh process may fork (the CLI's case); one running a second Python thread, or
    one that has started DuckDB, may not."""
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["True", "False", "False"]


@pytest.mark.parametrize("workers", [2, 3])
def test_a_worker_that_dies_is_one_clear_error(workers):
    """A worker killed outright (here by SIGKILL, as the OOM killer does) ends the whole
    map with one worded TraceVizError, not BrokenProcessPool's traceback."""
    with pytest.raises(TraceVizError, match=rf"a worker process died while reading the ranks "
                                            rf"\({workers} ran at once\): killed by the system"):
        list(_pool_map(signal.raise_signal, workers)([(signal.SIGKILL,)] * 4))


def _die(piece) -> tuple[str, object]:
    os.kill(os.getpid(), signal.SIGKILL)
    return "ok", None


def test_a_decode_worker_that_dies_is_one_clear_error():
    """The JSON decode pool likewise: a killed worker is a worded error naming the input
    and how to decode without workers."""
    from traceviz.parsers.jsonstream import Piece, decode_in_order

    pieces = iter([Piece(b"{}", b"") for _ in range(6)])
    with pytest.raises(TraceVizError, match=r"^t\.json: a decode worker process died \(killed "
                                            r"by the system: out of memory\? "
                                            r"TRACEVIZ_IMPORT_WORKERS=1"):
        list(decode_in_order(pieces, _die, workers=2, name="t.json"))


@pytest.mark.shared(*PAIR)
def test_repeated_dataset_analysis_under_a_tiny_limit_never_breaks_the_pool(tmp_path):
    """DuckDB under 1KB in workers, ten times in a process that has used DuckDB: each time
    the out-of-memory error is worded (forked workers died here one run in eight)."""
    folder = make_ranks(PAIR, 4, tmp_path / "four")[0].parent
    assert main(["import", str(folder), "-o", str(tmp_path / "ds")]) == 0
    for _ in range(10):
        with pytest.raises(TraceVizError, match="ran out of memory under the 1KB limit"):
            traceviz.ranks(tmp_path / "ds", memory_limit="1KB")


# a user's script with no `if __name__ == "__main__":` guard, having used DuckDB (so the
# workers come from the fork server); it prints "start" once per run of its body
UNGUARDED = """
import os, sys
print("start", flush=True)
import duckdb
import traceviz
os.environ["TRACEVIZ_IMPORT_WORKERS"] = "2"  # decode workers even at this size
os.environ["TRACEVIZ_READER"] = "python"  # processes (the compiled reader uses threads)
trace = traceviz.load(sys.argv[1])
summary = traceviz.ranks(sys.argv[2])
print(len(trace.events), len(summary.ranks), flush=True)
"""


@pytest.mark.shared(*PAIR)
def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(tmp_path):
    """The fork server's workers imported the main script again (for functions defined
    there; ours are not): the script's body ran in each worker and its traceviz call
    killed the worker ("a worker process died")."""
    folder = make_ranks(PAIR, 3, tmp_path / "three")[0].parent
    assert main(["import", str(folder), "-o", str(tmp_path / "ds")]) == 0
    script = tmp_path / "job.py"
    script.write_text(UNGUARDED)
    trace_file = shared(KINETO / "a100_alexnet.json.gz")
    r = subprocess.run([sys.executable, str(script), str(trace_file), str(tmp_path / "ds")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("start") == 1, r.stdout
    # the trace decoded by two workers has this process's events; the dataset its 3 ranks
    assert r.stdout.splitlines()[1].split() == [str(len(traceviz.load(trace_file).events)), "3"]


@pytest.mark.shared(*PAIR)
def test_a_failed_rank_exits_at_once_every_time(tmp_path):
    """A rank that fails stops the pool (kill_pool); a worker killed while writing its
    result left half a message that the pool's manager thread waited on for good, and the
    CLI's exit with it (about one run in five with decode workers in the rank workers).
    Ten runs: each one line, exit 2, within the timeout."""
    folder = make_ranks(PAIR, 4, tmp_path / "four")[0].parent
    whole = shared(KINETO / "a100_alexnet.json.gz").read_bytes()
    (folder / "rank-99.json.gz").write_bytes(whole[:len(whole) // 2])
    env = {**os.environ, "TRACEVIZ_IMPORT_WORKERS": "2"}
    for _ in range(10):
        r = subprocess.run([sys.executable, "-m", "traceviz", "analyze", str(folder)],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "rank-99.json.gz: truncated gzip file" in r.stderr
