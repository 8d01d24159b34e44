#!/usr/bin/env bash
# A user's own script profiled as users run it: examples/lstm_train.py (a 2-layer LSTM
# language model, steps from optimizer.step()) with module ranges (--modules).
# Run from the repo root with the project installed (.venv/bin on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
traceviz capture --warmup 2 --profile-steps 3 --modules --out sample_traces/script/lstm_train \
  --force -- python examples/lstm_train.py --steps 10 > /dev/null
echo sample_traces/script/lstm_train
