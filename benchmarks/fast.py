"""The speed goals of ``analyze`` and ``import``, each a ratio to its peer in the same run.

    python benchmarks/fast.py [--reps 5] [--import-reps 3] [--size-mb 200] [--hta-python PATH]
                              [--no-import] [--before DIR]

* whole-process ``traceviz analyze`` of a 1.8 MB gzipped Kineto trace
  (``a100_diff_control``) against ``python -c 'import pandas'``: goal <= 2x;
* the same for a small Nsight Systems export (``h100_2gpu_window.sqlite``): <= 2x;
* ``traceviz import`` of a ~200 MB Kineto JSON to Parquet (``benchmarks/ingest.py``'s
  child, its file built the same way) against HolisticTraceAnalysis'
  ``parse_trace_dataframe`` (its own venv, see ``ingest.py``): >= 8x and >= 177 MB/s,
  peak RSS of the process tree < 2x the JSON.

Runs alternate (traceviz, peer, traceviz, peer, ...), so that a busy machine slows both
sides alike; each figure is the median of ``--reps`` runs (the imports: 3 each) and each
ratio is taken between medians of the same run. Beside each wall-time ratio, the ratio of
CPU time (of the whole process tree, imports included), which another process on the
machine changes less. Before timing, each command runs once with
Python allowed to write its bytecode: no timed run compiles traceviz's sources (an
installed wheel has them compiled; ``PYTHONDONTWRITEBYTECODE`` would otherwise make every
run compile them, ~0.2 s). The floors print beside them: what the Python stack costs before
traceviz's own work (the interpreter, pandas, inflating and decoding the JSON with msgspec's
typed structs; reading the export's tables; for the import, decoding and writing the
Parquet), as the same ratio; and, for Kineto JSON, the same floor with every decoded field
read once from every event into a list, the least any reader of decoded Python objects
does before it has a column (an export's floor fetches its rows: it reads every field).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import CHILD_HTA, CHILD_TRACEVIZ, DATA, build, child  # noqa: E402

SHARED = ROOT.parent / "shared" / "traces"
KINETO = SHARED / "kineto" / "a100_diff_control.json.gz"
NSYS = SHARED / "nsys" / "h100_2gpu_window.sqlite"
PY = sys.executable
PANDAS = [PY, "-c", "import pandas"]
# a small analyze, whole process, against a Python that imports pandas (the speed issue's goal)
ANALYZE_GOAL = 2.0
# the import's throughput goal: what a C++ reader (Perfetto's trace processor) publishes
# for JSON traces
IMPORT_MBS = 177
# the floor of an analyze of a Kineto trace: interpreter, pandas, the file inflated and
# decoded by msgspec into typed structs of the fields an analysis reads (what any reading
# of it in Python pays)
FLOOR_KINETO = """
import sys, gzip
import msgspec, pandas
class Args(msgspec.Struct, gc=False):
    correlation: int | float | str | bool | None = None
    device: int | float | str | bool | None = None
    stream: int | float | str | bool | None = None
class Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | float | str | bool | None = None
    tid: int | float | str | bool | None = None
    ts: msgspec.Raw = msgspec.Raw(b"")
    dur: msgspec.Raw = msgspec.Raw(b"")
    args: Args | None = None
class Doc(msgspec.Struct, gc=False):
    traceEvents: list[Event] = []
events = msgspec.json.Decoder(Doc).decode(gzip.decompress(open(sys.argv[1], 'rb').read()))
"""
# the same, then every field that decoding kept read once from every event into a list:
# what any reader of decoded Python objects pays before building a column (no conversion,
# no checks)
FIELDS = """
def fields(events):
    args = [e.args for e in events]
    return ([e.ph for e in events], [e.cat for e in events], [e.name for e in events],
            [e.pid for e in events], [e.tid for e in events], [e.ts for e in events],
            [e.dur for e in events], [a.correlation if a else None for a in args],
            [a.device if a else None for a in args], [a.stream if a else None for a in args])
"""
FLOOR_KINETO_FIELDS = FLOOR_KINETO + FIELDS + "fields(events.traceEvents)\n"
# the floor of an analyze of an nsys export: interpreter, pandas, its activity tables'
# rows fetched
FLOOR_NSYS = """
import sys, sqlite3
import pandas
db = sqlite3.connect(sys.argv[1])
names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds",
          "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS"):
    if t in names:
        db.execute(f"SELECT * FROM {t}").fetchall()
"""
# where the import's time goes: decoding, columns, normalizing, writing (one run), and
# its floor, decoding alone plus the same Parquet write
CHILD_SPLIT = FIELDS + """
import sys, time
from pathlib import Path
import traceviz.parsers.kineto.kineto_reader as K
acc = {"decode": 0.0, "columns": 0.0, "join": 0.0, "normalize": 0.0}
def timed(key, fn):
    def run(*a, **k):
        t = time.perf_counter(); r = fn(*a, **k); acc[key] += time.perf_counter() - t
        return r
    return run
class Timed:
    decode = staticmethod(timed("decode", K.EVENTS.decode))
# either reader: the compiled one's read is its decoding, the columns are built after
K.EVENTS, K.event_columns = Timed, timed("columns", K.event_columns)
K.python_columns = timed("columns", K.python_columns)
K.native.native_columns = timed("decode", K.native.native_columns)
K.finish = timed("normalize", K.finish)
K.in_time_order = timed("join", K.in_time_order)
t = time.perf_counter(); trace = K.parse(Path(sys.argv[1])); parse = time.perf_counter() - t
t = time.perf_counter(); trace.save(sys.argv[2], force=True); acc["write"] = time.perf_counter() - t
acc["other"] = parse - acc["decode"] - acc["columns"] - acc["join"] - acc["normalize"]
print(" ".join(f"{k}={v:.2f}s" for k, v in acc.items()))
print("floor", acc["decode"] + acc["write"])
# the floor with the fields read: each piece decoded again and its fields read once (only
# the reading timed; the structs are freed inside it, as the import frees them)
from traceviz.parsers.jsonstream import file_ranges
from traceviz.parsers.kineto.plan import IN_PROCESS_CHUNK
ranges, _ = file_ranges(sys.argv[1], b"traceEvents", IN_PROCESS_CHUNK)
read = 0.0
for r in ranges:
    events = K.EVENTS.decode(b"[" + r.read() + b"]")
    t = time.perf_counter(); fields(events); del events; read += time.perf_counter() - t
print("fields", read)
"""


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(cmd: list[str], cwd: str | None = None, bytecode: bool = False
         ) -> tuple[float, float]:
    """Wall and CPU seconds of ``cmd``; ``bytecode``: Python may write its bytecode."""
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    cpu, t = _cpu_children(), time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       env=env, cwd=cwd)
    secs, cpu = time.perf_counter() - t, _cpu_children() - cpu
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return secs, cpu


def alternate(cmds: dict[str, tuple[list[str], str | None]], reps: int
              ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of each (command, working folder), ``reps`` rounds, the
    commands in turn each round."""
    for cmd, cwd in cmds.values():  # untimed: bytecode written, files in the page cache
        _run(cmd, cwd, bytecode=True)
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    keys = list(cmds)
    for i in range(reps):
        for k in rotated(keys, i):
            cmd, cwd = cmds[k]
            w, c = _run(cmd, cwd)
            wall[k].append(w)
            cpu[k].append(c)
    return wall, cpu


def rotated(keys: list[str], i: int) -> list[str]:
    """The commands in round ``i``'s order: rotated each round, so that none always runs
    right after the same one (in a fixed order, the import run right after HTA's, a
    process that frees gigabytes, measured 10-15% faster than the same code run first)."""
    i %= len(keys)
    return keys[i:] + keys[:i]


def timed_child(python: str, code: str, *args: str) -> tuple[float, int, float]:
    """``ingest.child``'s seconds and peak RSS, and the CPU seconds of its process tree."""
    cpu = _cpu_children()
    secs, rss, _ = child(python, code, *args)
    return secs, rss, _cpu_children() - cpu


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def analyze_goal(label: str, trace: Path, floor: str, reps: int,
                 before: str | None, floor_fields: str | None = None) -> list[str]:
    analyze = [PY, "-m", "traceviz", "analyze", str(trace)]
    cmds = {"analyze": (analyze, str(ROOT)), "pandas": (PANDAS, None),
            "floor": ([PY, "-c", floor, str(trace)], None)}
    if floor_fields:
        cmds["fields"] = ([PY, "-c", floor_fields, str(trace)], None)
    if before:  # run in its folder: the first entry of sys.path, before this checkout
        cmds["before"] = (analyze, before)
    t, cpu = alternate(cmds, reps)
    ratio = med(t["analyze"]) / med(t["pandas"])
    was = f"{med(t['before']) / med(t['pandas']):.2f}x ({med(t['before']):.2f} s)" \
        if before else "-"
    was_cpu = f"; before {med(cpu['before']) / med(cpu['pandas']):.2f}x" if before else ""
    fields = (f"{med(t['fields']) / med(t['pandas']):.2f}x (CPU "
              f"{med(cpu['fields']) / med(cpu['pandas']):.2f}x)") if floor_fields else "-"
    return [f"| `analyze` {label} | {med(t['analyze']):.2f} s | `import pandas` "
            f"{med(t['pandas']):.2f} s | **{ratio:.2f}x** (CPU "
            f"{med(cpu['analyze']) / med(cpu['pandas']):.2f}x{was_cpu}) | {was} "
            f"| <= {ANALYZE_GOAL:g}x | "
            f"{'met' if ratio <= ANALYZE_GOAL else 'not met'} | "
            f"{med(t['floor']) / med(t['pandas']):.2f}x (CPU "
            f"{med(cpu['floor']) / med(cpu['pandas']):.2f}x) | {fields} |"]


def import_goal(size_mb: int, hta: Path | None, reps: int, before: str | None) -> list[str]:
    src = build(size_mb)
    size = src.stat().st_size
    out = str(DATA / "fast.parquet")
    ours, rss, peer, was = [], [], [], []
    cpu: dict[str, list[float]] = {"ours": [], "peer": [], "was": []}
    def run_ours() -> None:
        secs, peak, c = timed_child(PY, CHILD_TRACEVIZ, str(src), out)
        ours.append(secs)
        rss.append(peak)
        cpu["ours"].append(c)

    def run_peer() -> None:
        secs, _, c = timed_child(str(hta), CHILD_HTA, str(src))
        peer.append(secs)
        cpu["peer"].append(c)

    def run_before() -> None:
        here = os.getcwd()
        os.chdir(str(before))  # its sources first on sys.path
        try:
            secs, _, c = timed_child(PY, CHILD_TRACEVIZ, str(src), out)
            was.append(secs)
            cpu["was"].append(c)
        finally:
            os.chdir(here)

    runs = {"ours": run_ours}
    if hta is not None:
        runs["peer"] = run_peer
    if before:
        runs["before"] = run_before
    for i in range(reps):
        for k in rotated(list(runs), i):
            runs[k]()
    split = subprocess.run([PY, "-c", CHILD_SPLIT, str(src), out], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    floor = float(split[1].split()[1])
    fields = floor + float(split[2].split()[1])
    print(f"import {size / 1e6:.0f} MB: {split[0]}; floor (decode + write) {floor:.2f} s, "
          f"with the fields read {fields:.2f} s", file=sys.stderr)
    if not peer:
        return [f"| import {size / 1e6:,.0f} MB JSON | {med(ours):.2f} s | (no HTA) | - | "
                f"- | >= 8x | - | - | - |"]
    ratio = med(peer) / med(ours)
    met = ratio >= 8 and size / 1e6 / med(ours) >= IMPORT_MBS and max(rss) < 2 * size
    before_ratio = f"{med(peer) / med(was):.1f}x ({med(was):.2f} s)" if was else "-"
    was_cpu = f"; before {med(cpu['peer']) / med(cpu['was']):.1f}x" if was else ""
    return [f"| import {size / 1e6:,.0f} MB JSON | {med(ours):.2f} s "
            f"({size / 1e6 / med(ours):.0f} MB/s), peak RSS {max(rss) / size:.2f}x the JSON | "
            f"HTA `parse_trace_dataframe` {med(peer):.2f} s | **{ratio:.1f}x** (CPU "
            f"{med(cpu['peer']) / med(cpu['ours']):.1f}x{was_cpu}) | "
            f"{before_ratio} | >= 8x, >= {IMPORT_MBS} MB/s, RSS < 2x | "
            f"{'met' if met else 'not met'} | "
            f"{med(peer) / floor:.1f}x | {med(peer) / fields:.1f}x |"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5, help="runs of each analyze figure (>= 3)")
    p.add_argument("--size-mb", type=int, default=200, help="import: JSON size in MB")
    p.add_argument("--import-reps", type=int, default=3,
                   help="runs of each import (traceviz, HTA; median)")
    p.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/hta/bin/python"),
                   help="the interpreter of HTA's own venv (default: $HTA_PYTHON or "
                        "/tmp/hta/bin/python)")
    p.add_argument("--no-import", action="store_true", help="the analyze goals only")
    p.add_argument("--before", metavar="DIR",
                   help="an earlier traceviz's sources (a folder holding its traceviz/, with "
                        "analyses/ and runners/ linked in as traceviz/analyses and "
                        "traceviz/runners), measured in the same run")
    args = p.parse_args()
    if args.reps < 3:
        raise SystemExit("--reps: at least 3 (the figures are medians)")
    if args.import_reps < 1:
        raise SystemExit("--import-reps: at least 1")
    before = str(Path(args.before).resolve()) if args.before else None
    rows = ["| figure | traceviz (median) | peer (median) | ratio (CPU ratio) | before | "
            "target | met | floor: decode (import: + write) | floor: + fields read and freed |",
            "|---|---|---|---|---|---|---|---|---|"]
    rows += analyze_goal(f"{KINETO.name} ({KINETO.stat().st_size / 1e6:.1f} MB)", KINETO,
                         FLOOR_KINETO, args.reps, before, FLOOR_KINETO_FIELDS)
    rows += analyze_goal(NSYS.name, NSYS, FLOOR_NSYS, args.reps, before)
    if not args.no_import:
        hta = Path(args.hta_python)
        if not hta.exists():
            print(f"note: no HTA interpreter at {hta}: the import ratio is not measured",
                  file=sys.stderr)
        rows += import_goal(args.size_mb, hta if hta.exists() else None, args.import_reps,
                            before)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
