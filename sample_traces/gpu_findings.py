"""The tables of docs/findings-h100.md, recomputed from the captures in sample_traces/gpu.

    python sample_traces/gpu_findings.py [DIR]

Every figure comes from the committed ``trace.parquet`` files (bench timings are embedded in
their metadata) and the two ``sweep.parquet`` files; nothing is typed in by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from traceviz.analyses.compare.amp_breakdown import amp_breakdown
from traceviz.analyses.compare.runs import MATRIX_CATEGORIES, RunFigures, run_figures
from traceviz.render.report import md_table
from traceviz.trace import Trace


def figures(root: Path, name: str, mode: str) -> RunFigures | None:
    path = root / name / mode / "trace.parquet"
    return run_figures(Trace.load(path), name) if path.exists() else None


def ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def variant_row(variant: str, f: RunFigures) -> dict:
    s = f.summary
    times = f.batch_times_s
    return {
        "variant": variant,
        "time/batch ms (median)": f"{1e3 * f.time_per_batch_s:.2f}",
        "min-max ms": f"{1e3 * min(times):.2f}-{1e3 * max(times):.2f}",
        "busy ms/step": ms(f.busy_ns / f.per_step),
        "kernels/step": f"{f.kernel_count / f.per_step:,.0f}",
        "launch-bound": pct(f.launch_bound_fraction),
        "launch delay µs (median)": f"{(s.launches.delay.median_ns or 0) / 1e3:.1f}",
        "queue depth (mean)": f"{s.devices[0].queue_mean:.2f}" if s.devices else "-",
        "gemm+rnn ms/step": ms(sum(f.category_ns[c] for c in MATRIX_CATEGORIES) / f.per_step),
    }


def amp_row(variant: str, amp: str, fp32: RunFigures, half: RunFigures) -> dict:
    b = amp_breakdown(fp32, half)
    return {
        "variant": variant, "amp": amp,
        "time/batch ms fp32 -> amp": f"{1e3 * fp32.time_per_batch_s:.2f} -> "
                                     f"{1e3 * half.time_per_batch_s:.2f}",
        "speed-up": f"{fp32.time_per_batch_s / half.time_per_batch_s:.2f}x",
        "casts ms/step": ms(b.cast_added_ns),
        "matrix ms/step fp32 -> amp": f"{ms(sum(fp32.category_ns[c] for c in MATRIX_CATEGORIES) / fp32.per_step)} -> "
                                      f"{ms(sum(half.category_ns[c] for c in MATRIX_CATEGORIES) / half.per_step)}",
        "busy ms/step fp32 -> amp": f"{ms(fp32.busy_ns / fp32.per_step)} -> "
                                    f"{ms(half.busy_ns / half.per_step)}",
        "tensor-core share": f"{pct(b.tensor_core_share_fp32)} -> {pct(b.tensor_core_share_amp)}",
    }


def sweep_table(path: Path, index: list[str], columns: str) -> pd.DataFrame:
    d = pd.read_parquet(path)
    d = d[d["status"] == "ok"].copy()
    d["ms"] = (1e3 * d["time_per_batch_s"]).round(2)
    return d.pivot_table(index=index, columns=columns, values="ms", aggfunc="first")


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else Path(__file__).parent / "gpu")
    variants = sorted({p.parent.parent.name for p in root.glob("*_torch/*/trace.parquet")})
    print((root / "machine.txt").read_text())
    for mode in ("train", "forward"):
        rows = [variant_row(v, f) for v in variants if (f := figures(root, v, mode))]
        print(f"\n### ptb_lm {mode}, FP32\n")
        print(md_table(pd.DataFrame(rows)))
    rows = []
    for v in variants:
        fp32 = figures(root, v, "train")
        for amp in ("bf16", "fp16"):
            half = figures(root, f"{v}-{amp}", "train")
            if fp32 and half:
                rows.append(amp_row(v, amp, fp32, half))
    print("\n### ptb_lm train, mixed precision\n")
    print(md_table(pd.DataFrame(rows)))
    batch = root / "sweep-batch" / "sweep.parquet"
    if batch.exists():
        print("\n### deepbench forward, hidden 512, seq 100: ms per batch\n")
        print(md_table(sweep_table(batch, ["model"], "batch").reset_index()))
    amp = root / "sweep-amp" / "sweep.parquet"
    if amp.exists():
        print("\n### rnn_bench train, batch 128: ms per batch by hidden, seq and amp\n")
        print(md_table(sweep_table(amp, ["model", "hidden", "seq"], "amp").reset_index()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
