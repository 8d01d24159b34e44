"""Capture LSTM variants (default: the PyTorch ones) and print a Markdown table of timings.

    python benchmarks/variants_table.py [--modes forward,train] [--amp none,bf16]
        [--device cpu] [--out runs/table] [-- extra capture flags, e.g. --preset ptb_lm]

Each cell comes from `traceviz capture` (own subprocess, benchmark phase without the
profiler): median time per batch and sequences/s from its bench.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from traceviz.runners import VARIANTS, variants

# the variant names come from the registry (runners/__init__.py), never from here
TORCH = [v.name for v in variants("torch")]
OTHERS = [v.name for v in variants() if v.framework in ("tensorflow", "jax")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", default="forward,train")
    p.add_argument("--amp", default="none,bf16")
    p.add_argument("--device", default="cpu")
    p.add_argument("--models", default=",".join(TORCH),
                   help="comma-separated variants; 'tf' = every TensorFlow variant + scan_jax")
    p.add_argument("--out", type=Path, default=Path("runs/table"))
    args, extra = p.parse_known_args()
    extra = [a for a in extra if a != "--"]
    rows = []
    models = OTHERS if args.models == "tf" else args.models.split(",")
    unknown = [m for m in models if m not in VARIANTS]
    if unknown:
        p.error(f"unknown variant {unknown[0]!r}; `traceviz models --names` lists them")
    for model in models:
        if not VARIANTS[model].runs_on(args.device):
            continue
        for mode in args.modes.split(","):
            for amp in args.amp.split(","):
                out = args.out / f"{model}-{mode}-{amp}"
                cmd = [sys.executable, "-m", "traceviz", "capture", "--model", model,
                       "--mode", mode, "--device", args.device, "--out", str(out), "--force",
                       *(["--amp", amp] if amp != "none" else []), *extra]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    rows.append((model, mode, amp, None, r.stderr.strip().splitlines()[-1]))
                    continue
                bench = json.loads((out / "bench.json").read_text())
                rows.append((model, mode, amp, bench, ""))
                print(f"{model} {mode} {amp}: {bench['time_per_batch_s']['median']:.4f} s",
                      file=sys.stderr)
    from traceviz.analyses.timings import timings

    print("| variant | mode | amp | time/batch (median) | min | max | CV | sequences/s | "
          "warm-up | first call | profiler overhead |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model, mode, amp, b, err in rows:
        if b is None:
            print(f"| {model} | {mode} | {amp} | failed: {err} | | | | | | | |")
            continue
        t = timings(b)
        assert t is not None
        cv = f"{100 * t.cv:.1f}%" + (" NOISY" if t.noisy else "")
        overhead = t.overhead_text
        first = "–" if t.first_call_s is None else f"{t.first_call_s:.3f} s" + (
            "" if t.compile_s is None else f" (compile {t.compile_s:.3f} s)")
        print(f"| {model} | {mode} | {amp} | {t.median_s:.4f} s | {t.min_s:.4f} | "
              f"{t.max_s:.4f} | {cv} | {b['sequences_per_s']:,.1f} | {t.warmup_batches} | "
              f"{first} | {overhead} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
