"""Ingest benchmark: traceviz vs HolisticTraceAnalysis on a ~1 GB Kineto trace.

    python benchmarks/ingest.py [--size-mb 1000] [--hta-python PATH]

Builds ``benchmarks/data/v100_19k_xN.json`` by repeating the events of
``../shared/traces/kineto/v100_19k_kernels.json.gz`` with timestamps shifted by the
trace's length and ids (correlation, External id, flow id) shifted so they stay unique.
Then, each in a fresh child process, measures:
  * ``traceviz import`` of that JSON -> Parquet (MB/s of JSON, peak RSS),
  * HTA's default parser (``parse_trace_dataframe``, JSON backend) on the same file,
  * ``traceviz analyze`` of the Parquet (wall time of the whole command).
Needs ``pip install -e '.[bench]'`` (orjson). HTA needs its own interpreter (its pins differ):
``python3 -m venv /tmp/hta && /tmp/hta/bin/pip install holistictraceanalysis``.
Peak RSS is sampled over the whole process tree (traceviz's decode workers included).
Targets (issue 2): >= 5x HTA's throughput, peak RSS < 2x the JSON size, analyze < 3 s.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "traces" / "kineto" / "v100_19k_kernels.json.gz"
DATA = ROOT / "benchmarks" / "data"


def build(size_mb: int) -> Path:
    import orjson

    doc = orjson.loads(gzip.decompress(SOURCE.read_bytes()))
    events = doc.pop("traceEvents")
    base = b",\n".join(orjson.dumps(e) for e in events)
    copies = max(1, round(size_mb * 1e6 / len(base)))
    if size_mb * 1e6 < 0.75 * len(base):  # smaller than the trace: its first events
        events = events[: max(1, int(len(events) * size_mb * 1e6 / len(base)))]
        out = DATA / f"v100_19k_{size_mb}mb.json"
    else:
        out = DATA / f"v100_19k_x{copies}.json"
    if out.exists():
        return out
    DATA.mkdir(parents=True, exist_ok=True)
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), int | float)]
    period = int(max(ts) - min(ts)) + 1000
    id_step = 10 ** 7
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        head = orjson.dumps(doc)[:-1]
        f.write(head + b', "traceEvents": [\n')
        for k in range(copies):
            shifted = []
            for e in events:
                e = dict(e)
                if isinstance(e.get("ts"), int | float):
                    e["ts"] = e["ts"] + k * period
                if "id" in e and isinstance(e["id"], int):
                    e["id"] += k * id_step
                args = e.get("args")
                if isinstance(args, dict):
                    args = dict(args)
                    for key in ("correlation", "External id"):
                        if isinstance(args.get(key), int):
                            args[key] += k * id_step
                    if isinstance(e.get("name"), str) and e["name"].startswith("ProfilerStep#"):
                        e["name"] = f"ProfilerStep#{int(e['name'][13:]) + k * 100}"
                    e["args"] = args
                shifted.append(orjson.dumps(e))
            f.write((b",\n" if k else b"") + b",\n".join(shifted))
        f.write(b"\n]}\n")
    tmp.rename(out)
    return out


# peak RSS of the child itself: VmHWM, which starts afresh at exec (ru_maxrss does not:
# it would carry this script's own peak into the child)
HWM = "int([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]) * 1024"

CHILD_TRACEVIZ = f"""
import sys, time
from traceviz.parsers import load
t = time.perf_counter()
trace = load(sys.argv[1])
trace.save(sys.argv[2], force=True)
print(time.perf_counter() - t, {HWM}, len(trace.events))
"""

CHILD_HTA = f"""
import sys, time, logging
logging.disable(logging.WARNING)
from hta.common.trace_parser import parse_trace_dataframe
from hta.configs.parser_config import ParserConfig
t = time.perf_counter()
meta, df, symbols = parse_trace_dataframe(sys.argv[1], ParserConfig.get_default_cfg())
print(time.perf_counter() - t, {HWM}, len(df))
"""


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants (worker processes count too)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def child(python: str, code: str, *args: str) -> tuple[float, int, int]:
    """Run ``code`` in a fresh interpreter; its seconds, peak RSS of its process tree, rows."""
    proc = subprocess.Popen([python, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        time.sleep(0.05)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({python}):\n{err[-2000:]}")
    secs, self_rss, rows = out.split()[-3:]
    return float(secs), max(peak, int(self_rss)), int(rows)


CHILD_BASELINE = f"""
import traceviz.parsers.kineto, traceviz.trace
print(0, {HWM}, 0)
"""


def memory_by_size(sizes: list[int]) -> int:
    """Peak RSS of the whole import (process tree) per JSON size, and its ratio."""
    _, base_rss, _ = child(sys.executable, CHILD_BASELINE)
    print(f"interpreter with traceviz's parser imported: {base_rss / 1e6:.0f} MB")
    print(f"{'JSON':>8} {'workers':>7} {'time':>7} {'peak RSS':>9} {'x JSON':>7}  "
          f"{'above interpreter':>17}")
    from traceviz.parsers.kineto.kineto_reader import _workers

    for size_mb in sizes:
        src = build(size_mb)
        size = src.stat().st_size
        out = DATA / "ingest.parquet"
        secs, rss, _ = child(sys.executable, CHILD_TRACEVIZ, str(src), str(out))
        print(f"{size / 1e6:6.0f} MB {_workers(src):>7} {secs:6.2f}s {rss / 1e6:7.0f} MB "
              f"{rss / size:6.2f}x  {(rss - base_rss) / size:6.2f}x")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=int, default=1000, help="target JSON size (default 1000)")
    p.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/hta/bin/python"),
                   help="interpreter with holistictraceanalysis installed")
    p.add_argument("--skip-hta", action="store_true")
    p.add_argument("--sizes", metavar="MB,MB,...",
                   help="only measure traceviz import's peak memory at these JSON sizes "
                        "(target: under 2x the JSON from 10 MB up)")
    args = p.parse_args()
    if args.sizes:
        return memory_by_size([int(v) for v in args.sizes.split(",")])

    src = build(args.size_mb)
    size = src.stat().st_size
    print(f"input: {src} ({size / 1e6:.0f} MB of JSON)")
    out = DATA / "ingest.parquet"

    secs, rss, rows = child(sys.executable, CHILD_TRACEVIZ, str(src), str(out))
    tv = {"secs": secs, "mbps": size / 1e6 / secs, "rss": rss, "rows": rows}
    print(f"traceviz import : {secs:7.2f} s  {tv['mbps']:7.1f} MB/s  peak RSS "
          f"{rss / 1e9:5.2f} GB ({rss / size:.2f}x JSON)  {rows:,} rows")

    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "traceviz", "analyze", str(out), "--json"],
                       capture_output=True, text=True)
    analyze_s = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    kernels = json.loads(r.stdout)["kernels"]["count"]
    print(f"traceviz analyze: {analyze_s:7.2f} s  (whole command, {kernels:,} kernels)")

    result = {"json_mb": size / 1e6, "traceviz": tv, "analyze_s": analyze_s}
    if not args.skip_hta:
        if not Path(args.hta_python).exists():
            raise SystemExit(f"no HTA interpreter at {args.hta_python}: see this script's doc")
        secs, rss, rows = child(args.hta_python, CHILD_HTA, str(src))
        hta = {"secs": secs, "mbps": size / 1e6 / secs, "rss": rss, "rows": rows}
        result["hta"] = hta
        print(f"HTA parser      : {secs:7.2f} s  {hta['mbps']:7.1f} MB/s  peak RSS "
              f"{rss / 1e9:5.2f} GB ({rss / size:.2f}x JSON)  {rows:,} rows")
        print(f"ratio           : traceviz throughput = {tv['mbps'] / hta['mbps']:.1f}x HTA; "
              f"peak RSS = {tv['rss'] / hta['rss']:.2f}x HTA")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())
