"""Process pools: how workers are started, and a worker's abrupt death worded."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

import traceviz
from benchmarks.rankgen import PAIR, make_ranks
from traceviz.cli import main
from traceviz.errors import TraceVizError
from traceviz.rankdir import _pool_map

CHECK = """
import threading
from traceviz.pools import fork_is_safe
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


def test_repeated_dataset_analysis_under_a_tiny_limit_never_breaks_the_pool(tmp_path):
    """DuckDB under 1KB in workers, ten times in a process that has used DuckDB: each time
    the out-of-memory error is worded (forked workers died here one run in eight)."""
    folder = make_ranks(PAIR, 4, tmp_path / "four")[0].parent
    assert main(["import", str(folder), "-o", str(tmp_path / "ds")]) == 0
    for _ in range(10):
        with pytest.raises(TraceVizError, match="ran out of memory under the 1KB limit"):
            traceviz.ranks(tmp_path / "ds", memory_limit="1KB")
