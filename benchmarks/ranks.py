"""Many ranks: import and analyze time and peak memory against HTA, in one run.

    python benchmarks/ranks.py [--ranks 8,32,128] [--hta-python PATH] [--skip-hta]

Rank folders of 8, 32 and 128 ranks are made from the shared two-rank traces
(``benchmarks/rankgen.py``: ids and times shifted per rank). For each, in fresh
processes, ``--reps`` times each (median time, largest peak RSS of the whole process tree,
import workers included):

  * ``traceviz import DIR -o DATASET`` (parallel, one rank per worker at a time),
  * ``traceviz analyze DATASET --json`` (DuckDB, one rank in memory at a time),
  * ``traceviz analyze DIR --json`` (one shot: parse and reduce each rank in workers),
  * HTA: ``TraceAnalysis(trace_dir=DIR)`` (parses every rank into memory) and its
    ``get_comm_comp_overlap``, the closest HTA analysis to ``analyze DIR``.

HTA needs its own interpreter (its pins differ):
``python3 -m venv /tmp/hta && /tmp/hta/bin/pip install holistictraceanalysis``.
Targets (issue 16): >= 5x HTA's time, analyze memory flat as ranks grow.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import HWM, child  # noqa: E402
from benchmarks.rankgen import PAIR, make_ranks  # noqa: E402

# the command's own output goes to /dev/null: a large --json would otherwise fill the pipe
# the parent reads only at the end
CHILD_TRACEVIZ = f"""
import contextlib, os, sys, time
from traceviz.cli import main
t = time.perf_counter()
with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
    code = main(sys.argv[1:])
assert code == 0, code
print(time.perf_counter() - t, {HWM}, 0)
"""

CHILD_HTA = f"""
import sys, time, logging, json
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
parse = time.perf_counter() - t
o = a.get_comm_comp_overlap(visualize=False)
with open(sys.argv[2], "w") as f:
    json.dump({{"parse_s": parse, "overlap": o.set_index("rank")["comp_comm_overlap_pctg"]
               .to_dict()}}, f)
print(time.perf_counter() - t, {HWM}, len(a.t.traces))
"""


def mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="8,32,128")
    p.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/hta/bin/python"))
    p.add_argument("--skip-hta", action="store_true")
    p.add_argument("--reps", type=int, default=3,
                   help="runs of each command: the median time and the largest peak RSS "
                        "are reported (one run on this shared 2-core machine varies 2x)")
    args = p.parse_args()

    def rep(python: str, code: str, *argv: str) -> tuple[float, int, int]:
        runs = [child(python, code, *argv) for _ in range(max(1, args.reps))]
        return (statistics.median(r[0] for r in runs), max(r[1] for r in runs), runs[-1][2])

    hta = not args.skip_hta and Path(args.hta_python).exists()
    if not args.skip_hta and not hta:
        print(f"note: no HTA interpreter at {args.hta_python}; HTA columns skipped",
              file=sys.stderr)
    rows = []
    for n in (int(x) for x in args.ranks.split(",")):
        work = Path(tempfile.mkdtemp(prefix=f"ranks{n}-"))
        try:
            folder = work / "ranks"
            make_ranks(PAIR, n, folder)
            size = sum(f.stat().st_size for f in folder.iterdir())
            ds = work / "ds"
            # each import writes a fresh dataset (an existing one is not overwritten)
            imports = [child(sys.executable, CHILD_TRACEVIZ, "import", str(folder), "-o",
                             str(work / f"ds{k}")) for k in range(max(1, args.reps))]
            t_imp = statistics.median(r[0] for r in imports)
            rss_imp = max(r[1] for r in imports)
            (work / "ds0").rename(ds)
            out = work / "analyze.json"
            t_an, rss_an, _ = rep(sys.executable, CHILD_TRACEVIZ, "analyze", str(ds),
                                  "--json", "--memory-limit", "1GB")
            t_dir, rss_dir, _ = rep(sys.executable, CHILD_TRACEVIZ, "analyze", str(folder),
                                    "--json")
            row = {"ranks": n, "gz": size, "import_s": t_imp, "import_rss": rss_imp,
                   "analyze_s": t_an, "analyze_rss": rss_an, "dir_s": t_dir,
                   "dir_rss": rss_dir}
            if hta:
                t_h, rss_h, seen = rep(args.hta_python, CHILD_HTA, str(folder), str(out))
                row.update(hta_s=t_h, hta_rss=rss_h, hta_ranks=seen,
                           hta_overlap=json.loads(out.read_text())["overlap"])
            rows.append(row)
            print(row, file=sys.stderr)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print("| ranks | traces (gz) | traceviz import | peak RSS | analyze (DuckDB) | peak RSS |"
          " analyze DIR (one shot) | peak RSS |"
          + (" HTA TraceAnalysis + overlap | peak RSS | HTA / (import + analyze) |"
             " HTA / analyze | HTA / analyze DIR |" if hta else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|---|---|---|---|" if hta else ""))
    for r in rows:
        ours = r["import_s"] + r["analyze_s"]
        line = (f"| {r['ranks']} | {mb(r['gz'])} | {r['import_s']:.1f} s | "
                f"{mb(r['import_rss'])} | {r['analyze_s']:.1f} s | {mb(r['analyze_rss'])} | "
                f"{r['dir_s']:.1f} s | {mb(r['dir_rss'])} |")
        if hta:
            line += (f" {r['hta_s']:.1f} s | {mb(r['hta_rss'])} | "
                     f"{r['hta_s'] / ours:.1f}x | {r['hta_s'] / r['analyze_s']:.1f}x | "
                     f"{r['hta_s'] / r['dir_s']:.1f}x |")
        print(line)
    if hta and rows:
        print("\nHTA comm/comp overlap (%) of ranks 0 and 1:",
              {k: v for k, v in rows[0]["hta_overlap"].items() if int(k) < 2})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
