"""Run the LSTM optimization ladder and print it as a Markdown table (docs/ladder.md).

    python benchmarks/ladder_table.py [--device cpu] [--full] [--steps 10] [--repeat 3]
        [--out runs/ladder-table] [--rungs a,b,...]

Each rung is one `traceviz capture` (its own subprocess, the benchmark phase without the
profiler), the whole ladder run ``--repeat`` times one after the other (so a burst of
load elsewhere on the machine hits one repeat of a rung, not all of them): the median of
the repeats' medians, the min-max of every timed batch, the CV of the repeats' medians
(noise between repeats), the first batches' time above the median, the speed-ups over
naive8_torch and over the rung below (from the medians of medians), the study's figure
and whatif's prediction (from the last repeat's traces).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
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
    p.add_argument("--repeat", type=int, default=1, help="runs of the whole ladder")
    p.add_argument("--rungs", help="comma-separated rungs (default: all on the device)")
    p.add_argument("--out", type=Path, default=Path("runs/ladder-table"))
    args = p.parse_args()
    asked = set(args.rungs.split(",")) | {BASELINE} if args.rungs else None
    rungs = tuple(r for r in RUNGS if (asked is None or r.variant in asked)
                  and VARIANTS[r.variant].runs_on(args.device))
    w, _ = ladder_workload(args.device, args.full)
    medians: dict[str, list[float]] = {}
    batches: dict[str, list[float]] = {}
    for rep in range(args.repeat):
        def started(k: int, n: int, variant: str, rep: int = rep) -> None:
            print(f"repeat {rep + 1}/{args.repeat}, rung {k}/{n}: {variant}", file=sys.stderr)

        results = run_ladder(w, args.device, args.out / f"repeat{rep}", rungs,
                             warmup=args.warmup, steps=args.steps, on_start=started)
        for r in results:
            if r.median_s is not None:
                medians.setdefault(r.rung.variant, []).append(r.median_s)
                bench = json.loads((Path(r.run_dir) / "bench.json").read_text())
                batches.setdefault(r.rung.variant, []).extend(bench["batch_times_s"])
    # the last repeat's rows, their time figures replaced by those over all repeats
    for r in results:
        m = medians.get(r.rung.variant)
        if m:
            r.median_s = statistics.median(m)
            r.min_s, r.max_s = min(batches[r.rung.variant]), max(batches[r.rung.variant])
            r.cv = statistics.pstdev(m) / statistics.fmean(m)
            r.noisy = r.cv > 0.10
    base = medians.get(BASELINE)
    by_name = {r.rung.variant: r for r in results}
    last = {r.rung.variant: r.speedup for r in results}  # the last repeat's
    for r in results:
        if r.median_s and base:
            r.speedup = statistics.median(base) / r.median_s
    for r in results:
        below = by_name.get(r.rung.base or "")
        was = last.get(r.rung.base or "")
        if r.predicted is not None and below and below.speedup and was:
            # whatif's factor times the base rung's speed-up, now over all repeats
            r.predicted *= below.speedup / was
        r.step = below.median_s / r.median_s if below and below.median_s and r.median_s \
            else None
    import torch

    print(f"{w.layers} layers x hidden {w.hidden}, seq {w.seq}, batch {w.batch}, forward, FP32; "
          f"{args.device} ({platform.processor() or platform.machine()}, "
          f"{len(os.sched_getaffinity(0))} cores, torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads); {args.steps} timed batches per rung, "
          f"{args.repeat} repeat(s)\n")
    print("| rung | what | median ms | min–max ms | CV of repeats | first call s | × naive8 | "
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
