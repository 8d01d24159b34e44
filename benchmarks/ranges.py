"""The speed goals of an export of NVTX ranges alone, each figure beside its peer.

    python benchmarks/ranges.py [--reps 5] [--ranges 1000000] [--keep DIR]

* whole-process ``traceviz analyze`` of ``ecf_baseline.sqlite`` (1,824 NVTX ranges, no CUDA)
  against ``python -c 'import pandas'`` measured in the same run: goal <= 1.5x. Runs
  alternate (traceviz, pandas, ...) so a busy machine slows both alike; each figure is the
  median of ``--reps``, CPU time (user + system of the process) beside wall time.
* ``traceviz analyze`` of a generated export of ``--ranges`` NVTX push/pop ranges (7
  names, nested three deep on 4 threads, one domain; the table as nsys 2022.4 writes it):
  the process's peak RSS above the peak of a process that imports traceviz, pandas and
  pyarrow and does nothing (the interpreter's own baseline, which every analyze pays),
  against the export's size: goal <= 2x.
* the wall time of ``traceviz analyze`` of that export (the whole command, its terminal
  output) against ``nsys stats --report nvtxsum`` of the same file, measured in the same
  run, alternating: goal <= 1.5x. ``--nsys`` names the nsys binary (default: ``nsys`` on
  the PATH; without one the ratio is not measured).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ECF = ROOT.parent / "shared" / "traces" / "foreign" / "nsys" / "ecf_baseline.sqlite"
PY = sys.executable
ANALYZE = [PY, "-m", "traceviz", "analyze"]
PANDAS = [PY, "-c", "import pandas"]
# a child that reports its own peak RSS (KiB on Linux) on stderr's last line
PEAK = ("import resource, sys\n{body}\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run, output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def peak_kib(body: str) -> int:
    done = subprocess.run([PY, "-c", PEAK.format(body=body)], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    return int(done.stderr.strip().splitlines()[-1])


def make_export(path: Path, n: int, seed: int = 0) -> None:
    """``n`` NVTX push/pop ranges as nsys writes them (NVTX_EVENTS, StringIds, a domain
    registered): per thread, outer ranges each holding two middles each holding two
    inner ones, so 1/7 are outer, 2/7 middle, 4/7 inner."""
    rng = np.random.default_rng(seed)
    threads = 4
    outer = max(1, n // 7 // threads)
    rows = []
    for t in range(threads):
        gtid = (1 << 56) | (4242 << 24) | (4242 + t)
        dur = rng.integers(5_000, 500_000, size=(outer, 7))
        start = np.cumsum(dur[:, 0] + 1_000) - dur[:, 0]
        o_end = start + dur[:, 0]
        half = dur[:, 0] // 2
        for m in range(2):
            m_start = start + m * half
            m_end = m_start + half - 10
            q = (half - 10) // 2
            for i in range(2):
                i_start = m_start + i * q
                rows.append((i_start, i_start + q - 5, gtid, f"inner_{(m * 2 + i) % 16}"))
            rows.append((m_start, m_end, gtid, f"middle_{m}"))
        rows.append((start, o_end, gtid, "step_body"))
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, "
                   "eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
                   "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, "
                   "textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value "
                   "INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, "
                   "floatValue REAL, jsonTextId INTEGER, jsonText TEXT)")
        db.execute("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) "
                   "VALUES (0, 75, 'bench', ?, 1)", ((1 << 56) | (4242 << 24) | 4242,))
        for s, e, gtid, text in rows:
            db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, "
                           "domainId) VALUES (?, ?, 59, ?, ?, 1)",
                           ((int(a), int(b), text, gtid) for a, b in zip(s, e, strict=True)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--ranges", type=int, default=1_000_000)
    p.add_argument("--keep", type=Path, help="write the generated export here")
    p.add_argument("--nsys", default=shutil.which("nsys"),
                   help="the nsys binary for the nvtxsum peer (default: nsys on the PATH)")
    args = p.parse_args()
    env_note = f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    analyze = [*ANALYZE, str(ECF)]
    # compile bytecode once, outside the timed runs (as an installed wheel has it; with
    # PYTHONDONTWRITEBYTECODE set every run would compile traceviz's sources, ~0.4 s)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for cmd in (analyze, PANDAS):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
    ours, peer = [], []
    for _ in range(args.reps):
        ours.append(timed(analyze))
        peer.append(timed(PANDAS))
    w_o, c_o = (statistics.median(x) for x in zip(*ours, strict=True))
    w_p, c_p = (statistics.median(x) for x in zip(*peer, strict=True))
    print(f"# {env_note}; medians of {args.reps}")
    print(f"analyze {ECF.name}: wall {w_o:.3f} s, cpu {c_o:.3f} s")
    print(f"python -c 'import pandas': wall {w_p:.3f} s, cpu {c_p:.3f} s")
    print(f"ratio: wall {w_o / w_p:.2f}x, cpu {c_o / c_p:.2f}x (goal <= 1.5x)")

    with tempfile.TemporaryDirectory(prefix="traceviz-ranges-") as tmp:
        path = (args.keep or Path(tmp)) / f"ranges_{args.ranges}.sqlite"
        path.unlink(missing_ok=True)
        t0 = time.perf_counter()
        make_export(path, args.ranges)
        made = time.perf_counter() - t0
        size = path.stat().st_size
        # peaks alternate too, medians of 3 (a peak moves by a few MiB between runs)
        peaks, floors, walls = [], [], []
        for _ in range(3):
            t0 = time.perf_counter()
            peaks.append(peak_kib("from traceviz.cli import main\n"
                                  f"assert main(['analyze', {str(path)!r}, '--json']) == 0"))
            walls.append(time.perf_counter() - t0)
            floors.append(peak_kib("import pandas, pyarrow, traceviz.cli, "
                                   "traceviz.parsers.nsys"))
        peak, floor, wall = (statistics.median(x) for x in (peaks, floors, walls))
        mib = 1024 * 1024
        print(f"generated export: {args.ranges:,} ranges, {size / mib:.1f} MiB ({made:.1f} s)")
        print(f"analyze --json of it: wall {wall:.2f} s, peak RSS {peak / 1024:.1f} MiB; "
              f"the interpreter's baseline (imports alone) {floor / 1024:.1f} MiB; above "
              f"it {(peak - floor) / 1024:.1f} MiB = {(peak - floor) * 1024 / size:.2f}x "
              "the export (goal <= 2x)")
        if args.nsys:
            _against_nsys(args, path)


def _against_nsys(args: argparse.Namespace, path: Path) -> None:
    """``traceviz analyze FILE`` against ``nsys stats --report nvtxsum FILE``, alternating,
    each started once untimed first (bytecode, the page cache)."""
    ours_cmd = [*ANALYZE, str(path)]
    # nsys writes its report to a file beside the export unless told: stdout, discarded
    peer_cmd = [args.nsys, "stats", "--report", "nvtxsum", "--format", "csv", "--output",
                "-", str(path)]
    for cmd in (ours_cmd, peer_cmd):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       cwd=ROOT)
    ours, peer = [], []
    reps = args.reps
    for _ in range(reps):
        ours.append(timed(ours_cmd))
        peer.append(timed(peer_cmd))
    w_o, c_o = (statistics.median(x) for x in zip(*ours, strict=True))
    w_p, c_p = (statistics.median(x) for x in zip(*peer, strict=True))
    print(f"analyze of it: wall {w_o:.2f} s, cpu {c_o:.2f} s; nsys stats --report nvtxsum: "
          f"wall {w_p:.2f} s, cpu {c_p:.2f} s (medians of {reps})")
    print(f"ratio: wall {w_o / w_p:.2f}x, cpu {c_o / c_p:.2f}x (goal <= 1.5x)")


if __name__ == "__main__":
    main()
