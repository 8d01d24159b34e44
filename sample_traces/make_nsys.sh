#!/usr/bin/env bash
# A real Nsight Systems capture on the CPU machine (nsys 2022.4 from Debian non-free):
# nn.LSTM training, tiny ptb_lm shapes, NVTX step/phase/op ranges.
# Run from the repo root with the project installed (.venv/bin on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
traceviz capture --model cudnn_torch --profiler nsys --mode train --device cpu --preset ptb_lm \
  --batch 8 --seq 10 --hidden 64 --layers 1 --vocab 1000 --embed 32 \
  --warmup 1 --steps 3 --profile-steps 2 --out sample_traces/nsys/cudnn_torch_train --force > /dev/null
rm -f sample_traces/nsys/cudnn_torch_train/runner.log
ls -la sample_traces/nsys/cudnn_torch_train
