"""A guard against the next slowdown of ``import`` and ``analyze``, which a busy machine
cannot fool: each figure is timed against a baseline measured in the same process, run for
run (decoding the same JSON with the standard library's ``json.loads``; starting Python and
importing pandas), as CPU time (what another process takes from the machine is not ours),
the least of a few alternating runs. The in-process figures are measured in a fresh Python
of their own: in a test worker that has run hundreds of tests, the garbage collector walks
every object those tests left, and the ratio doubled with nothing in traceviz changed. A
test fails only when its ratio is more than twice the ratio committed here, a change no
noise makes; a ratio far below it asks for the committed one to be lowered (the message
says so). The speed targets themselves are measured by ``benchmarks/fast.py`` (wall time,
beside the peers).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import KINETO, shared

TRACE = KINETO / "a100_diff_control.json.gz"  # 1.8 MB gzipped, 35 MB of JSON, 109k events
REPS = 3
WORSE = 2.0  # a ratio over WORSE x its committed value fails
# CPU time of each figure / its baseline's, as measured on the project's 2-core VM
# (median of 3 pytest runs), the baseline being json.loads of the inflated file for the
# in-process figures and `python -c "import pandas"` for the whole command
# analyze 0.92x -> 1.08x and the whole process 2.75x -> 3.05x when analyze gained the
# input pipeline, communication, user ranges, step windows and kernel activity sections
COMMITTED = {"import": 0.52, "analyze": 1.08, "analyze, whole process": 3.05}


def _child_cpu(cmd: list[str], env: dict[str, str]) -> float:
    """CPU seconds of a child process (and any it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                   check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _least_ratio(measured: Callable[[], float], baseline: Callable[[], float]) -> float:
    """The least of each over ``REPS`` alternating runs, as a ratio."""
    ours, base = [], []
    for _ in range(REPS):
        base.append(baseline())
        ours.append(measured())
    return min(ours) / min(base)


def _check(figure: str, ratio: float) -> None:
    committed = COMMITTED[figure]
    print(f"{figure}: {ratio:.2f}x its baseline (committed {committed:.2f}x)")
    assert ratio <= WORSE * committed, (
        f"{figure} took {ratio:.2f}x its baseline's CPU time, over {WORSE:g}x the "
        f"committed {committed:.2f}x: a slowdown (profile it: docs/benchmarks.md)")
    if ratio < committed / WORSE:
        print(f"{figure}: under half the committed ratio: lower COMMITTED[{figure!r}]")


# One figure measured in a fresh interpreter: argv[1] is "import" or "analyze", argv[2]
# the trace, argv[3] the repetitions; it prints the ratio of the least CPU times.
_PROBE = """
import contextlib, gzip, io, json, sys, time
from pathlib import Path
figure, trace, reps = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
raw = trace.read_bytes()
if figure == "import":
    from traceviz.parsers import load
    def measured():
        load(trace)
else:
    from traceviz.cli import main
    def measured():
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["analyze", str(trace), "--width", "120"]) == 0
def cpu(fn):
    t = time.process_time()
    fn()
    return time.process_time() - t
measured()  # once untimed: per-process caches (classification, regexes) filled
ours, base = [], []
for _ in range(reps):
    base.append(cpu(lambda: json.loads(gzip.decompress(raw))))
    ours.append(cpu(measured))
print(min(ours) / min(base))
"""


def _fresh_ratio(figure: str) -> float:
    """The figure's ratio to ``json.loads``, measured in a Python of its own."""
    done = subprocess.run([sys.executable, "-c", _PROBE, figure, str(shared(TRACE)), str(REPS)],
                          capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def test_import_against_json_loads():
    """Reading the trace into its events table (inflating, decoding, columns,
    normalizing) against inflating and decoding it with ``json.loads``."""
    _check("import", _fresh_ratio("import"))


def test_analyze_against_json_loads():
    """``traceviz analyze`` in one process (read, every figure, the tables printed)."""
    _check("analyze", _fresh_ratio("analyze"))


def test_whole_analyze_against_importing_pandas(tmp_path: Path):
    """The whole command, Python's start and every import included, against a Python
    that imports pandas. Bytecode goes to a folder of its own, written by a first
    untimed run of each (as a wheel's is at install time), so that neither compiles
    sources in the timed runs, whatever ``PYTHONDONTWRITEBYTECODE`` says."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"),
               COLUMNS="120")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    analyze = [sys.executable, "-m", "traceviz", "analyze", str(shared(TRACE))]
    pandas = [sys.executable, "-c", "import pandas"]
    for cmd in (analyze, pandas):
        _child_cpu(cmd, env)
    _check("analyze, whole process", _least_ratio(lambda: _child_cpu(analyze, env),
                                                  lambda: _child_cpu(pandas, env)))
