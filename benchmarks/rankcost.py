"""What one rank costs `analyze DIR`: a fixed part and a part per event.

    python benchmarks/rankcost.py [--reps 30] [TRACE]

Times ``rankset.folder.folder_rank`` (read, normalize, rank figures: what each worker does per
rank file) on time slices of one rank trace (default: the shared ``ampere_sampled_rank0``):
its first N complete events by start time, metadata kept, for several N. A least-squares
line through (events, ms), of the minima and of the medians, splits the cost into a
fixed part per file and a part per event: when the fixed part dominates, many small ranks
gain more from parsing several files in one pass than from faster per-event code.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT = ROOT.parent / "shared" / "traces" / "kineto" / "ampere_sampled_rank0.json.gz"


def sliced(doc: dict, n: int, out: Path) -> Path:
    """``doc`` keeping its first ``n`` complete ("X") events by start time."""
    events = doc["traceEvents"]
    complete = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: float(e["ts"]))
    part = dict(doc, traceEvents=[e for e in events if e.get("ph") != "X"] + complete[:n])
    path = out / f"rank-{n}.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(part, f)
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args()
    from traceviz.rankset.folder import folder_rank

    with gzip.open(args.trace, "rt") as f:
        doc = json.load(f)
    total = sum(1 for e in doc["traceEvents"] if e.get("ph") == "X")
    sizes = sorted({min(n, total) for n in (250, 500, 1000, 2000, total)})
    points = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = str(sliced(doc, n, Path(tmp)))
            folder_rank(0, path)  # warm: imports, caches
            times = []
            for _ in range(args.reps):
                t = time.perf_counter()
                folder_rank(0, path)
                times.append(time.perf_counter() - t)
            points.append((n, statistics.median(times) * 1e3, min(times) * 1e3))
            print(f"{n:>6} events: median {points[-1][1]:.1f} ms, min {points[-1][2]:.1f} ms")
    # the minimum is the steadier figure on a shared machine; the median is shown too
    for label, col in (("min", 2), ("median", 1)):
        slope, fixed = statistics.linear_regression([pt[0] for pt in points],
                                                    [pt[col] for pt in points])
        print(f"fit of the {label}s: {fixed:.1f} ms per file + {slope * 1e3:.2f} µs per event"
              f" (the whole trace: {fixed / (fixed + slope * total):.0%} fixed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
