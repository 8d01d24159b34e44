"""Run the LSTM optimization ladder and print it as a Markdown table (docs/ladder.md).

    python benchmarks/ladder_table.py [--device cpu] [--full] [--steps 10]
        [--out runs/ladder-table] [--rungs a,b,...]

Each rung is one `traceviz capture` (its own subprocess, the benchmark phase without the
profiler): median time per batch over the timed batches, their min-max and CV (NOISY
where CV > 10% or max/min > 1.5), the first batches' time above the median, the speed-up
over naive8_torch and over the rung below, the study's figure and whatif's prediction.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

from traceviz.ladder import BASELINE, RUNGS, ladder_workload, run_ladder
from traceviz.runners import VARIANTS


def _x(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}×"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--full", action="store_true", help="the study's shape on a CPU too")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rungs", help="comma-separated rungs (default: all on the device)")
    p.add_argument("--out", type=Path, default=Path("runs/ladder-table"))
    args = p.parse_args()
    asked = set(args.rungs.split(",")) | {BASELINE} if args.rungs else None
    rungs = tuple(r for r in RUNGS if (asked is None or r.variant in asked)
                  and VARIANTS[r.variant].runs_on(args.device))
    w, _ = ladder_workload(args.device, args.full)
    results = run_ladder(w, args.device, args.out, rungs, warmup=args.warmup,
                         steps=args.steps,
                         on_start=lambda k, n, v: print(f"rung {k}/{n}: {v}", file=sys.stderr))
    import torch

    print(f"{w.layers} layers x hidden {w.hidden}, seq {w.seq}, batch {w.batch}, forward, FP32; "
          f"{args.device} ({platform.processor() or platform.machine()}, "
          f"{len(os.sched_getaffinity(0))} cores, torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads); {args.steps} timed batches per rung\n")
    print("| rung | what | median ms | min–max ms | CV | first call s | × naive8 | "
          "× rung below | study × below | whatif × naive8 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        rung = r.rung
        study = "—" if rung.study is None else f"{rung.study:.3g}×"
        pred = _x(r.predicted) + (f" ({r.prediction_note})" if r.prediction_note else "")
        if r.median_s is None:
            print(f"| {rung.variant} | {rung.what} | failed: {r.error} | | | | | | {study} | |")
            continue
        noisy = " NOISY" if r.noisy else ""
        first = "—" if r.first_call_s is None else f"{r.first_call_s:.2f}" + (
            f" (compile {r.compile_s:.1f})" if r.compile_s else "")
        print(f"| {rung.variant} | {rung.what} | {r.median_s * 1e3:.1f} | "
              f"{(r.min_s or 0) * 1e3:.1f}–{(r.max_s or 0) * 1e3:.1f} | "
              f"{100 * (r.cv or 0):.1f}%{noisy} | {first} | {_x(r.speedup)} | "
              f"{_x(r.step)} over {rung.base or '—'} | {study} | {pred} |")
    for r in results:
        if r.rung.study_note:
            print(f"\n{r.rung.variant}, the study: {r.rung.study_note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
