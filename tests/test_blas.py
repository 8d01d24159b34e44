"""numpy's BLAS held to one thread by the commands that read traces (``system.blas``):
the process starts no BLAS thread, the environment it leaves to the processes it starts
is as it was, and a number the user chose is kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from traceviz.system.pools import usable_cores

_VAR = "OPENBLAS_NUM_THREADS"
# the threads of a process that imported numpy, and the variable it leaves
_IMPORTED = """
import os
from traceviz.system import blas
blas.import_numpy_with_one_blas_thread()
print(len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS"))
"""


def _run(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != _VAR}
    return subprocess.run([sys.executable, "-c", code], env=base | env, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.fixture(autouse=True)
def _linux_two_cores():
    if not sys.platform.startswith("linux") or usable_cores() < 2:
        pytest.skip("OpenBLAS starts a thread per core: seen on Linux with two cores or more")


def test_numpy_imported_for_a_command_starts_no_blas_thread():
    """A plain ``import numpy`` starts OpenBLAS's threads (one per core beside the main
    one); imported for a command, the process keeps its one thread, and the variable is
    gone again once numpy is in."""
    plain = _run("import os, numpy; print(len(os.listdir('/proc/self/task')))")
    assert int(plain) > 1
    assert _run(_IMPORTED) == "1 None"


def test_a_number_the_user_chose_is_kept():
    assert _run(_IMPORTED, **{_VAR: "2"}) == "2 2"
