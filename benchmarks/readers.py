"""What would lift the import: JSON readers in maintained libraries against traceviz's own.

    python benchmarks/readers.py [--size-mb 200] [--reps 3] [--hta-python PATH]

The import of a Kineto JSON spends most of its time turning the event array into columns:
msgspec decodes each piece into Python objects and traceviz reads every field of every
object into typed columns (about 1.2 us an event). This script measures, each in a fresh
process on the same file (``benchmarks/ingest.py``'s 214 MB build), what that step costs
with traceviz's reader and with the JSON readers of maintained libraries that write
columns natively, and what the whole import would then take:

* ``traceviz, compiled reader``: its own C reader (``parsers/kineto_native.c``) + the
  column-building path over the pieces it reads in process (16 MB), the import's default;
* ``traceviz, Python reader``: msgspec decode + the same column-building path over the
  pieces it reads in process (2 MB), its fallback (``TRACEVIZ_READER=python``);
* ``pyarrow.json`` (2 threads, each piece one JSON row): it refuses a field whose JSON type
  changes between events (Kineto writes ``"pid": "Spans"`` beside numeric pids), so it is
  timed with ``pid`` and ``tid`` left out; its figure is a lower bound;
* ``polars.read_json`` (a schema with the mixed fields as strings);
* ``duckdb`` ``read_json`` (2 threads, mixed fields as VARCHAR, the array in a file of its
  own);
* ``simdjson`` (pysimdjson, in an interpreter of its own: ``python3 -m venv /tmp/simd &&
  /tmp/simd/bin/pip install pysimdjson``, ``--simdjson-python``): its parse of the whole
  document alone, no columns: what a compiled reader built on it pays before appending
  each field to a column (a floor, not a reader).

"import with it" is the measured import minus traceviz's step plus the reader's (the
rest, normalizing, the Parquet write, reading the file, unchanged); its ratio to HTA's
``parse_trace_dataframe`` uses HTA's time measured in the same run (``--hta-python``).
The readers come from the ``[test]`` extra (polars, duckdb); none is a dependency of
traceviz.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.fast import rotated  # noqa: E402
from benchmarks.ingest import CHILD_HTA, CHILD_TRACEVIZ, DATA, HWM, build, child  # noqa: E402

# each child prints: seconds of the measured step, peak RSS, events read
OURS = f"""
import os, sys, time
os.environ["TRACEVIZ_READER"] = "python"
from traceviz.parsers import kineto as K
from traceviz.parsers.jsonstream import file_ranges
ranges, _ = file_ranges(sys.argv[1], b"traceEvents", K.IN_PROCESS_CHUNK)
t = time.perf_counter(); n = 0
for r in ranges:
    status, value = K.decode_piece(r)
    assert status == "ok", value
    n += len(value[0])
print(time.perf_counter() - t, {HWM}, n)
"""
OURS_NATIVE = OURS.replace('"python"', '"native"').replace("IN_PROCESS_CHUNK", "CHUNK_BYTES")
PYARROW = f"""
import io, sys, time
from concurrent.futures import ThreadPoolExecutor
import pyarrow as pa, pyarrow.json as pj
from traceviz.parsers import kineto as K
from traceviz.parsers.jsonstream import file_ranges
I, D = pa.int64(), pa.decimal128(38, 3)
args = pa.struct([("correlation", I), ("device", I), ("stream", I), ("bytes", I),
                  ("grid", pa.list_(I)), ("block", pa.list_(I))])
event = pa.struct([("ph", pa.string()), ("cat", pa.string()), ("name", pa.string()),
                   ("ts", D), ("dur", D), ("args", args)])
options = pj.ParseOptions(explicit_schema=pa.schema([("e", pa.list_(event))]),
                          unexpected_field_behavior="ignore")
def one(r):
    data = b'{{"e":[' + r.read() + b']}}'
    ro = pj.ReadOptions(block_size=len(data) + 16, use_threads=False)
    return len(pj.read_json(io.BytesIO(data), read_options=ro, parse_options=options)
               .column("e").chunk(0).values)
ranges, _ = file_ranges(sys.argv[1], b"traceEvents", K.CHUNK_BYTES)
t = time.perf_counter()
with ThreadPoolExecutor(2) as pool:
    n = sum(pool.map(one, ranges))
print(time.perf_counter() - t, {HWM}, n)
"""
POLARS = f"""
import io, sys, time
import polars as pl
raw = open(sys.argv[1], "rb").read()
start = raw.index(b"[", raw.index(b'"traceEvents"')); end = raw.rindex(b"]") + 1
arr = raw[start:end]; del raw
args = pl.Struct({{"correlation": pl.Int64, "device": pl.Int64, "stream": pl.Int64,
                   "grid": pl.List(pl.Int64), "block": pl.List(pl.Int64)}})
schema = {{"ph": pl.String, "cat": pl.String, "name": pl.String, "pid": pl.String,
           "tid": pl.String, "ts": pl.String, "dur": pl.String, "args": args}}
t = time.perf_counter()
n = len(pl.read_json(io.BytesIO(arr), schema=schema))
print(time.perf_counter() - t, {HWM}, n)
"""
DUCKDB = f"""
import sys, time
import duckdb
raw = open(sys.argv[1], "rb").read()
start = raw.index(b"[", raw.index(b'"traceEvents"')); end = raw.rindex(b"]") + 1
open(sys.argv[2], "wb").write(raw[start:end]); del raw
con = duckdb.connect(); con.execute("SET threads=2")
q = (f"SELECT * FROM read_json('{{sys.argv[2]}}', format='array', "
     "maximum_object_size=1000000000, columns={{ph:'VARCHAR', cat:'VARCHAR', name:'VARCHAR', "
     "pid:'VARCHAR', tid:'VARCHAR', ts:'VARCHAR', dur:'VARCHAR', args:'STRUCT(correlation "
     "BIGINT, device BIGINT, stream BIGINT, grid JSON, block JSON)'}})")
t = time.perf_counter()
n = con.sql(q).to_arrow_table().num_rows
print(time.perf_counter() - t, {HWM}, n)
"""
SIMDJSON = f"""
import sys, time
import simdjson
data = open(sys.argv[1], "rb").read()
parser = simdjson.Parser()
parser.parse(data)  # its buffers allocated once, as a reader of many pieces would
t = time.perf_counter()
n = len(parser.parse(data)["traceEvents"])
print(time.perf_counter() - t, {HWM}, n)
"""


def _has(python: str, module: str) -> bool:
    r = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
    return r.returncode == 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=int, default=200, help="JSON size in MB")
    p.add_argument("--reps", type=int, default=3,
                   help="runs of each (median; at least 3: 'import with it' is a difference "
                        "of two medians)")
    p.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/hta/bin/python"),
                   help="the interpreter of HTA's own venv (default: $HTA_PYTHON or "
                        "/tmp/hta/bin/python)")
    p.add_argument("--simdjson-python", default="/tmp/simd/bin/python",
                   help="an interpreter with pysimdjson installed")
    args = p.parse_args()
    if args.reps < 3:
        raise SystemExit("--reps: at least 3 ('import with it' is the difference of two "
                         "medians: with one run each it moved nearly 2x)")
    src = build(args.size_mb)
    size = src.stat().st_size
    scratch = str(DATA / "readers_array.json")
    out = str(DATA / "readers.parquet")
    py, simd = sys.executable, args.simdjson_python
    # the first is the import's own reader: "import with it" swaps its step for another's
    readers = {"traceviz, compiled reader + columns": (OURS_NATIVE, py,
                                                       "traceviz.parsers._kineto_native"),
               "traceviz, Python reader (msgspec) + columns": (OURS, py, "traceviz.parsers"),
               "pyarrow.json, 2 threads (no pid/tid)": (PYARROW, py, "pyarrow.json"),
               "polars.read_json": (POLARS, py, "polars"),
               "duckdb read_json, 2 threads": (DUCKDB, py, "duckdb"),
               "simdjson parse only (no columns)": (SIMDJSON, simd, "simdjson")}
    present = {k: v for k, v in readers.items()
               if Path(v[1]).exists() and _has(v[1], v[2])}
    hta = Path(args.hta_python)
    times: dict[str, list[float]] = {k: [] for k in [*present, "import", "hta"]}
    events: dict[str, int] = {}
    runs = {"import": (CHILD_TRACEVIZ, sys.executable, out),
            **{name: (code, python, scratch) for name, (code, python, _) in present.items()}}
    if hta.exists():
        runs["hta"] = (CHILD_HTA, str(hta), "")
    for i in range(args.reps):  # alternating, so that a busy machine slows each alike
        for name in rotated(list(runs), i):
            code, python, extra = runs[name]
            secs, _, n = child(python, code, str(src), *([extra] if extra else []))
            times[name].append(secs)
            events[name] = n
    Path(scratch).unlink(missing_ok=True)
    med = {k: statistics.median(v) for k, v in times.items() if v}
    ours = med[next(iter(readers))]
    print(f"{size / 1e6:,.0f} MB of Kineto JSON; traceviz import {med['import']:.2f} s"
          + (f", HTA parse_trace_dataframe {med['hta']:.2f} s" if "hta" in med else
             f" (no HTA at {hta}: no ratios)") + f"; medians of {args.reps}")
    print("| reader | rows out (traceviz: the events kept) | the step | import with it | "
          "x HTA |")
    print("|---|---|---|---|---|")
    for name in readers:
        if name not in present:
            print(f"| {name} | - | not installed | - | - |")
            continue
        total = med["import"] - ours + med[name]
        ratio = f"{med['hta'] / total:.1f}x" if "hta" in med else "-"
        print(f"| {name} | {events[name]:,} | {med[name]:.2f} s | {total:.2f} s | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
