#!/usr/bin/env bash
# CPU captures of every PyTorch variant that runs on a CPU (tiny ptb_lm shapes, forward).
# The list comes from the registry: graph_torch needs a GPU (CUDA graphs) and is left out.
# Run from the repo root with the project installed (.venv/bin on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
for m in $(traceviz models --names --framework torch --device cpu); do
  traceviz capture --model "$m" --mode forward --device cpu --preset ptb_lm \
    --batch 8 --seq 10 --hidden 64 --layers 2 --vocab 1000 --embed 32 \
    --warmup 2 --steps 5 --profile-steps 2 --out "sample_traces/cpu/$m" --force > /dev/null
  rm -f "sample_traces/cpu/$m/runner.log"
  echo "sample_traces/cpu/$m"
done
