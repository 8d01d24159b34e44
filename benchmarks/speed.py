"""Every speed figure of the speed issue beside its peer, measured in one run.

    python benchmarks/speed.py [--reps 3] [--sizes 200,1000] [--hta-python PATH]
                               [--xprof-python PATH]

Each figure is the wall time of a fresh process (start-up included), repeated ``--reps``
times (the imports of ``--sizes`` MB JSON once each: they take minutes), printed as min
and median with the ratio peer / traceviz (> 1: traceviz is faster). Peers: HTA's default
parser in its own interpreter (``python3 -m venv /tmp/hta && /tmp/hta/bin/pip install
holistictraceanalysis``), ``nsys stats`` on the shared SQLite export, xprof's converter
making its overview page of the shared XSpace (``python3 -m venv /tmp/xprof &&
/tmp/xprof/bin/pip install xprof``); a missing peer is skipped with a note. Targets:
``--help`` < 0.15 s, analyze of a 2 MB trace < 0.5 s,
import >= 10x HTA, analyze of >= 1M device rows < 0.5 s, nsys/XSpace within 2x the peer.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import CHILD_HTA, CHILD_TRACEVIZ, DATA, build, child  # noqa: E402

SHARED = ROOT.parent / "shared" / "traces"
KINETO_2MB = SHARED / "kineto" / "a100_diff_control.json.gz"
NSYS = SHARED / "nsys" / "h100_2gpu_window.sqlite"
XSPACE = SHARED / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz"
TRACEVIZ = [sys.executable, "-m", "traceviz"]
# xprof's converter (the C++ behind its profile plugin) making its overview page, the page
# closest to `analyze`'s summary. It saves its op stats beside the XSpace and would read
# them back on the next run: they are removed first, so every run converts.
CHILD_XPROF = """
import sys
from pathlib import Path
for cached in Path(sys.argv[1]).parent.glob("*.op_stats*.pb"):
    cached.unlink()
from xprof.convert import raw_to_tool_data
data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "overview_page",
                                               {"use_saved_result": False})
if not data:
    raise SystemExit("xprof made no overview page")
"""


def wall(cmd: list[str], reps: int) -> list[float]:
    """Seconds of ``cmd`` (a fresh process each time), output discarded."""
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        out.append(time.perf_counter() - t)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return out


def cell(times: list[float] | None) -> str:
    if not times:
        return "-"
    return f"{min(times):.2f} / {statistics.median(times):.2f} s"


def ratio(ours: list[float], peer: list[float] | None) -> str:
    if not peer:
        return "-"
    r = statistics.median(peer) / statistics.median(ours)
    return f"{r:.2f}x" if r < 1 else f"{r:.1f}x"  # a slower traceviz shows as 0.04x, not 0.0x


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--sizes", default="200,1000", help="import sizes in MB of JSON")
    p.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/hta/bin/python"))
    p.add_argument("--xprof-python", default=os.environ.get("XPROF_PYTHON",
                                                            "/tmp/xprof/bin/python"),
                   help="an interpreter with xprof (pip install xprof) for the XSpace peer")
    args = p.parse_args()
    hta = Path(args.hta_python) if Path(args.hta_python).exists() else None
    notes = []
    if hta is None:
        notes.append(f"no HTA interpreter at {args.hta_python}: import ratios skipped")
    nsys = shutil.which("nsys")
    if nsys is None:
        notes.append("nsys not installed: the nsys peer skipped")
    xprof = Path(args.xprof_python) if Path(args.xprof_python).exists() else None
    if xprof is None:
        notes.append(f"no xprof interpreter at {args.xprof_python}: the XSpace peer skipped")
    rows = []

    def row(figure: str, ours: list[float], peer_name: str = "", peer=None, target=""):
        rows.append((figure, cell(ours), peer_name or "-", cell(peer), ratio(ours, peer),
                     target))
        print(rows[-1], file=sys.stderr)

    row("`traceviz --help`", wall([*TRACEVIZ, "--help"], args.reps), target="< 0.15 s")
    row(f"`analyze` {KINETO_2MB.name} ({KINETO_2MB.stat().st_size / 1e6:.1f} MB)",
        wall([*TRACEVIZ, "analyze", str(KINETO_2MB)], args.reps), target="< 0.5 s")
    # gpukernsum: the name nsys 2022.4 knows (it exits 0 on an unknown report name)
    nsys_peer = wall([nsys, "stats", "--report", "gpukernsum", "--format", "csv",
                      "--output", "-", str(NSYS)], args.reps) if nsys else None
    row(f"`analyze` {NSYS.name}", wall([*TRACEVIZ, "analyze", str(NSYS)], args.reps),
        "`nsys stats` kernel summary", nsys_peer, "within 2x")
    # xprof converts an uncompressed .xplane.pb: both read the same inflated copy, in a
    # folder of its own (xprof's saved op stats land beside it and are removed each run)
    xspace = DATA / "xspace" / XSPACE.name.removesuffix(".gz")
    if not xspace.exists():
        xspace.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(XSPACE, "rb") as f, open(xspace, "wb") as g:
            shutil.copyfileobj(f, g)
    xprof_peer = wall([str(xprof), "-c", CHILD_XPROF, str(xspace)], args.reps) if xprof \
        else None
    row(f"`analyze` {xspace.name}", wall([*TRACEVIZ, "analyze", str(xspace)], args.reps),
        "xprof overview_page", xprof_peer, "within 2x")

    for size_mb in (int(s) for s in args.sizes.split(",") if s):
        src = build(size_mb)
        gz = src.with_suffix(".json.gz")
        if not gz.exists():
            with open(src, "rb") as f, gzip.open(gz, "wb", compresslevel=6) as g:
                shutil.copyfileobj(f, g, 16 << 20)
        for path in (src, gz):
            out = DATA / f"speed-{path.name}.parquet"
            ours = [child(sys.executable, CHILD_TRACEVIZ, str(path), str(out))[0]]
            peer = [child(str(hta), CHILD_HTA, str(path))[0]] if hta else None
            label = f"import {src.stat().st_size / 1e6:,.0f} MB JSON" + \
                (" (gzipped)" if path is gz else "")
            row(label, ours, "HTA parse_trace_dataframe", peer, ">= 10x HTA")
    big, device, total = million_rows()
    row(f"`analyze` Parquet of {device / 1e6:.1f}M device rows ({total / 1e6:.1f}M rows)",
        wall([*TRACEVIZ, "analyze", str(big)], args.reps), target="< 0.5 s")

    print("| figure | traceviz (min / median) | peer | peer (min / median) | peer / traceviz"
          " | target |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    for n in notes:
        print(f"\nnote: {n}")
    return 0


def million_rows(copies: int = 45) -> tuple[Path, int, int]:
    """A traceviz Parquet of >= 1M device rows: v100_19k_kernels' events repeated
    ``copies`` times, times, ids and steps shifted (built once, kept in benchmarks/data)."""
    import numpy as np
    import pandas as pd

    from traceviz import load
    from traceviz.trace import Trace

    out = DATA / f"v100_19k_x{copies}_events.parquet"
    src = load(SHARED / "kineto" / "v100_19k_kernels.json.gz")
    ev = src.events
    if not out.exists():
        period = int((ev["ts_ns"] + ev["dur_ns"]).max()) + 1000
        steps = int(ev["step"].max()) + 1
        parts = []
        for k in range(copies):
            e = ev.copy()
            e["ts_ns"] += k * period
            e["launch_ts_ns"] += k * period
            for col in ("launch_id", "correlation"):
                e[col] = np.where(e[col] >= 0, e[col] + k * 10**7, -1)
            e["step"] = np.where(e["step"] >= 0, e["step"] + k * steps, -1)
            parts.append(e)
        big = pd.concat(parts, ignore_index=True)
        for col in ("name", "op", "launch_api", "details"):
            big[col] = big[col].astype(ev[col].dtype)
        DATA.mkdir(parents=True, exist_ok=True)
        Trace(big, dict(src.meta)).save(out, force=True)
    device = int(ev["kind"].isin(["kernel", "memcpy", "memset"]).sum()) * copies
    return out, device, len(ev) * copies


if __name__ == "__main__":
    raise SystemExit(main())
