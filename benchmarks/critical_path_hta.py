"""The critical path beside HTA's: the same ranges of the shared traces, side by side.

    python benchmarks/critical_path_hta.py [--hta-python /tmp/hta/bin/python] [--write]

HTA (HolisticTraceAnalysis 0.5, `critical_path_analysis`) runs in its own interpreter:
``python3 -m venv /tmp/hta && /tmp/hta/bin/pip install holistictraceanalysis==0.5.0
"pandas<2.2" "numpy<2"`` (0.5 fails on pandas 3). For each range it prints both paths'
length and parts and the kernels on each; ``--write`` stores HTA's figures in
``tests/data/hta_critical_path.json``, which ``tests/test_critical_path.py`` holds
traceviz's path against (the kernels on it, one by one).

The two models differ (DESIGN.md, "Critical path"): HTA's nodes are the CPU ops and
kernels as recorded, with the launch delays and gaps as recorded; traceviz's are the
runtime calls and device rows of its replay, with the launch latency and queue gap it
learnt. Device work on the path is where both agree exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces" / "kineto"
OUT = ROOT / "tests" / "data" / "hta_critical_path.json"
# (trace, annotation, instances): HTA's own critical-path test data and its ranges
CASES = [("a100_alexnet.json.gz", "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
         ("a100_event_sync.json.gz", "ProfilerStep", 1)]

CHILD = r'''
import sys, json, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
df = a.t.get_trace(0)
out = []
for inst in range(int(sys.argv[3])):
    g, ok = a.critical_path_analysis(rank=0, annotation=sys.argv[2], instance_id=inst)
    b = g.get_critical_path_breakdown() if ok else None
    if b is None:
        out.append({"instance": inst, "ok": False}); continue
    ts = [g.node_list[i].ts for i in g.critical_path_nodes]
    dev = b[(b["type"] == "critical_path_operator") & (b["stream"] >= 0)]
    rows = df.loc[dev["event_idx"]]
    out.append({"instance": inst, "ok": True, "path_start_us": int(min(ts)),
                "path_end_us": int(max(ts)), "total_us": int(b.duration.sum()),
                "bound_by_us": {k: int(v) for k, v in
                                b.groupby("bound_by").duration.sum().items() if k},
                "device_us": int(dev.duration.sum()),
                "kernels": sorted([int(t), int(d)] for t, d in zip(rows["ts"], rows["dur"]))})
print(json.dumps(out))
'''


def hta(python: str, trace: Path, annotation: str, n: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as d:  # HTA reads a folder of rank traces
        shutil.copy(trace, Path(d) / "rank0.json.gz")
        r = subprocess.run([python, "-c", CHILD, d, annotation, str(n)], capture_output=True,
                           text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def ours(trace: Path, annotation: str) -> list[dict]:
    from traceviz.analyses.critical_path.path import PARTS, critical_path
    from traceviz.parsers import load

    t = load(trace)
    cp = critical_path(t, annotation)
    ev = t.events
    origin = int(t.meta.get("origin_ns", 0))
    first = int(ev["ts_ns"].min())
    kernels = sorted([int((ts + first) // 1000), int(d // 1000)] for ts, d in
                     zip(ev.loc[cp.rows, "ts_ns"], ev.loc[cp.rows, "dur_ns"], strict=True))
    # HTA's compute-bound time is the kernels' time on its path; traceviz's device part
    # also holds the path's other time while the device ran work (docs/metrics.md)
    return [{"length_ns": int(s["length_ns"]), **{p: int(s[f"{p}_ns"]) for p in PARTS},
             "kernel_ns": int(cp.kernels["on_path_ns"].sum()),
             "kernels": kernels, "origin_ns": origin} for s in cp.steps.to_dict("records")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/hta/bin/python"))
    p.add_argument("--write", action="store_true", help=f"store HTA's figures in {OUT}")
    args = p.parse_args()
    stored = {}
    for name, annotation, n in CASES:
        theirs = hta(args.hta_python, SHARED / name, annotation, n)
        mine = ours(SHARED / name, annotation)
        for i, (h, m) in enumerate(zip(theirs, mine, strict=False)):
            print(f"{name} {annotation!r} #{i}")
            print(f"  HTA      : path {h['total_us']:,} us ({h['path_start_us']:,} -> "
                  f"{h['path_end_us']:,}); " + ", ".join(f"{k} {v:,}" for k, v in
                                                          h["bound_by_us"].items()))
            print(f"  traceviz : window {m['length_ns'] / 1e3:,.0f} us; " + ", ".join(
                f"{k} {m[k] / 1e3:,.0f}" for k in ("host", "launch", "device", "queue", "sync")))
            same = h["kernels"] == m["kernels"]
            print(f"  kernels on the path: HTA {len(h['kernels'])} ({h['device_us']:,} us), "
                  f"traceviz {len(m['kernels'])} ({m['device'] / 1e3:,.0f} us): "
                  + ("the same kernels" if same else "DIFFERENT"))
        stored[f"{name} {annotation} "] = theirs
    if args.write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps({"hta": "0.5.0", "cases": [
            {"trace": n, "annotation": a, "instances": stored[f"{n} {a} "]}
            for n, a, _ in CASES]}, indent=1) + "\n")
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
