"""Reading costs what the file holds: an nsys export whose tables are views that never
end is stopped by its limits or by a signal, an XSpace is read into memory linear in its
size, and a traceviz Parquet is refused from its metadata before it is read (the limits
in ``traceviz/files/limits.py``, ``docs/failures.md``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, shared

TRACEVIZ = [sys.executable, "-m", "traceviz"]
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
# rows for ever, or (filtered) no row ever: one SQLite call that never returns
ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT {} FROM r"
STUCK = ENDLESS + " WHERE n < 0"


def _export_with_view(tmp_path: Path, table: str, body: str,
                      values: dict[str, str] | None = None) -> Path:
    """A real nsys export whose ``table`` is replaced by a view over ``body``: every
    column the table had, each the view's counter ``n`` unless ``values`` says."""
    path = tmp_path / "v.sqlite"
    shutil.copy(shared(SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite"), path)
    path.chmod(0o644)
    db = sqlite3.connect(path)
    cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
    db.execute(f"DROP TABLE {table}")
    select = ", ".join(f"{(values or {}).get(c, 'n')} AS {c}" for c in cols)
    db.execute(f"CREATE VIEW {table} AS " + body.format(select))
    db.commit()
    db.close()
    return path


def _analyze(path: Path, env: dict[str, str] | None = None, timeout: float = 60
             ) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run([*TRACEVIZ, "analyze", str(path), "--json"], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})
    return done.returncode, done.stderr, time.monotonic() - started


def test_nsys_view_of_endless_rows_is_refused_by_its_size(tmp_path):
    path = _export_with_view(tmp_path, KERNEL, ENDLESS)
    rc, err, _ = _analyze(path)
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0] and f"table {KERNEL} reads as more than" in lines[0]
    assert "TRACEVIZ_MAX_SQLITE_RATIO=N" in lines[0]


def test_nsys_view_that_never_returns_a_row_ends_at_the_time_limit(tmp_path):
    path = _export_with_view(tmp_path, "StringIds", STUCK)
    rc, err, seconds = _analyze(path, {"TRACEVIZ_MAX_SQLITE_SECONDS": "1"})
    assert rc == 2, err
    assert err.strip().count("\n") == 0, err
    assert str(path) in err and "reading table StringIds took past 1 s" in err
    assert "TRACEVIZ_MAX_SQLITE_SECONDS=N" in err
    assert seconds < 30  # start-up and the 1 s, on a busy machine


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Connection.setlimit: Python 3.11")
def test_nsys_value_larger_than_the_file_is_refused(tmp_path):
    path = _export_with_view(tmp_path, "StringIds",
                             "SELECT 1 AS id, zeroblob(50000000) AS value")
    rc, err, _ = _analyze(path)
    assert rc == 2 and "table StringIds reads as a value of more than" in err, err
    assert "TRACEVIZ_MAX_SQLITE_RATIO=N" in err


def test_nsys_limits_can_be_raised_for_a_view_that_ends(tmp_path):
    """A view of 70,000 kernels reads more values (18 each) than the file has bytes:
    refused, then read once the limit is lifted."""
    kernels = {"start": "n * 1000", "end": "n * 1000 + 500", "deviceId": "0",
               "streamId": "7", "globalPid": "0", "correlationId": "n"}
    path = _export_with_view(tmp_path, KERNEL, ENDLESS.replace(
        "FROM r)", "FROM r WHERE n < 70000)"), {"demangledName": "1", **kernels})
    assert _analyze(path)[0] == 2
    rc, err, _ = _analyze(path, {"TRACEVIZ_MAX_SQLITE_RATIO": "0"})
    assert rc == 0, err
    rc, err, _ = _analyze(path, {"TRACEVIZ_MAX_SQLITE_RATIO": "lots"})
    assert rc == 2 and "TRACEVIZ_MAX_SQLITE_RATIO='lots': not a number" in err


def _reading(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (it is reading the export)."""
    try:
        return any(os.readlink(f) == str(path) for f in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated")])
def test_signal_ends_a_read_stuck_in_sqlite(tmp_path, sig, code, word):
    """Stuck inside one SQLite call, a signal still ends the run at once."""
    path = _export_with_view(tmp_path, KERNEL, STUCK).resolve()
    # SIGINT as a terminal leaves it: a test runner's worker may ignore it
    proc = subprocess.Popen([*TRACEVIZ, "analyze", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not _reading(proc.pid, path) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        time.sleep(1.0)  # into the kernel table's read, where it stays
        assert proc.poll() is None, proc.communicate()
        sent = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert err.strip() == f"traceviz: {word}", err
    assert took < 2.0, took


# --- XSpace ---------------------------------------------------------------------------

def _xspace(name: str, kernels: int) -> bytes:
    """A real XSpace: one GPU stream whose ``kernels`` events all name one metadata entry
    (``name``), and the host thread that launched them, one launch call each."""
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    host = space.planes.add(id=1, name="/host:CPU")
    host.stat_metadata[1].id, host.stat_metadata[1].name = 1, "correlation_id"
    host.event_metadata[1].id, host.event_metadata[1].name = 1, "cuLaunchKernel"
    launches = host.lines.add(id=7, name="python", timestamp_ns=1000)
    gpu = space.planes.add(id=2, name="/device:GPU:0")
    gpu.stat_metadata[1].id, gpu.stat_metadata[1].name = 1, "correlation_id"
    gpu.event_metadata[1].id, gpu.event_metadata[1].name = 1, name
    stream = gpu.lines.add(id=7, name="Stream #7(Compute)", timestamp_ns=1000)
    for i in range(kernels):
        call = launches.events.add(metadata_id=1, offset_ps=i * 20_000, duration_ps=4_000)
        call.stats.add(metadata_id=1, uint64_value=i + 1)
        kernel = stream.events.add(metadata_id=1, offset_ps=i * 20_000 + 6_000,
                                   duration_ps=10_000)
        kernel.stats.add(metadata_id=1, uint64_value=i + 1)
    return space.SerializeToString()


def test_small_xspace_reads_under_a_small_address_space(tmp_path):
    """A read reserves the file's size, not the limit: with the limit of a 128 GB machine
    (an eighth: 16 GB) a 284-byte XSpace is read under ``ulimit -v`` 4.5 GB."""
    import resource

    path = tmp_path / "small.xplane.pb"
    path.write_bytes(_xspace("volta_sgemm_128x64_nn", 6))
    assert path.stat().st_size < 400

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (int(4.5 * (1 << 30)),) * 2)

    done = subprocess.run([*TRACEVIZ, "analyze", str(path), "--json"], capture_output=True,
                          text=True, timeout=120, preexec_fn=limit,
                          env={**os.environ, "TRACEVIZ_MAX_XSPACE_MB": "16384"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["busy_ns"] == 6 * 10  # six kernels of 10 ns


_PEAK = ("import sys, traceviz\n"
         "trace = traceviz.load(sys.argv[1])\n"
         "assert len(trace.events) > 0\n"
         "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])")


def _peak_kb(path: Path) -> int:
    """Peak resident memory (kB) of a fresh process that reads ``path``."""
    done = subprocess.run([sys.executable, "-c", _PEAK, str(path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")
def test_xspace_name_shared_by_many_events_is_held_once(tmp_path):
    """400 kernels name one 1 MB metadata entry: the read holds that name a few times
    over, never once per event (a copy per event took 100 times the file)."""
    shared_name = tmp_path / "shared.xplane.pb"
    shared_name.write_bytes(_xspace("k" * (1 << 20), 400))
    short = tmp_path / "short.xplane.pb"
    short.write_bytes(_xspace("k", 400))
    size_kb = shared_name.stat().st_size >> 10
    grown = _peak_kb(shared_name) - _peak_kb(short)
    assert grown < 10 * size_kb, (grown, size_kb)
    print(f"read of a {size_kb:,} kB file grew the peak by {grown:,} kB")


# --- traceviz Parquet -----------------------------------------------------------------

def _parquet_of_one_row(tmp_path: Path, rows: int) -> Path:
    """A traceviz Parquet holding one real kernel row ``rows`` times: identical rows
    compress to almost nothing (40 M of them: 2.7 MB)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import traceviz

    src = tmp_path / "one.json"
    src.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "pid": 0, "tid": 7,
         "args": {"device": 0, "stream": 7}}]}))
    one = traceviz.load(src).save(tmp_path / "one.parquet")
    table = pq.read_table(one)
    block = table.take(pa.array([0] * (1 << 20)))
    path = tmp_path / "many.parquet"
    with pq.ParquetWriter(path, table.schema, compression="zstd") as writer:
        for start in range(0, rows, len(block)):
            writer.write_table(block.slice(0, min(len(block), rows - start)))
    return path


def test_parquet_of_too_many_rows_for_its_size_is_refused_from_its_footer(tmp_path):
    path = _parquet_of_one_row(tmp_path, 3_000_000)  # about 290 MB once read
    assert path.stat().st_size < (1 << 20)
    rc, err, _ = _analyze(path)
    assert rc == 2, err
    assert err.strip().count("\n") == 0, err
    assert f"{path}: 3,000,000 rows in 0." in err and "more than the limit of 256 MB" in err
    assert "TRACEVIZ_MAX_PARQUET_RATIO=N" in err
    # raised, it reads
    load = "import sys, traceviz; print(len(traceviz.load(sys.argv[1]).events))"
    done = subprocess.run([sys.executable, "-c", load, str(path)], capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "TRACEVIZ_MAX_PARQUET_RATIO": "0"})
    assert done.returncode == 0 and done.stdout.split() == ["3000000"], done.stderr
