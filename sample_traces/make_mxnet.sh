#!/usr/bin/env bash
# Real MXNet 1.9.1 captures on the CPU machine (imdb preset, tiny shapes, train), with
# and without DataLoader workers. Needs ./.venv-mxnet (`traceviz env mxnet`).
# Run from the repo root with the project installed (.venv/bin on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
for w in 0 2; do
  traceviz capture --model gluon_mxnet --preset imdb --workers "$w" --device cpu \
    --batch 16 --seq 20 --warmup 2 --steps 5 --profile-steps 2 \
    --out "sample_traces/mxnet/gluon_mxnet_imdb_w$w" --force > /dev/null
  rm -f "sample_traces/mxnet/gluon_mxnet_imdb_w$w/runner.log"
  echo "sample_traces/mxnet/gluon_mxnet_imdb_w$w"
done
