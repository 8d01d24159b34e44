#!/usr/bin/env bash
# A CPU sweep of four variants (deepbench-style, forward) and its report, committed as
# sample_traces/cpu_sweep/{sweep.parquet, report.md, report_files/, report.html}.
# The per-point run folders stay out of git (large); rerun this to regenerate them.
set -euo pipefail
cd "$(dirname "$0")/.."
out=sample_traces/cpu_sweep
traceviz sweep --models cudnn_torch,fine_torch,jit_torch,fused_torch --preset deepbench \
  --mode forward --batch 8,16,32 --seq 10,20 --hidden 128 --layers 1 --device cpu \
  --warmup 2 --steps 5 --profile-steps 2 --out "$out" --force
traceviz sweep-plot "$out" --force
traceviz report "$out" sample_traces/cpu/cudnn_torch sample_traces/cpu/fused_torch \
  -o "$out/report.md" --title "traceviz: LSTM variants on a 2-core CPU" --force
traceviz report "$out" sample_traces/cpu/cudnn_torch sample_traces/cpu/fused_torch \
  -o "$out/report.html" --title "traceviz: LSTM variants on a 2-core CPU" --force
