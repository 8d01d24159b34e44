#!/usr/bin/env bash
# Real TensorFlow 2.21 / Keras 3 and JAX 0.10.2 captures on the CPU machine: every TF
# variant and scan_jax (from the registry), imdb preset, tiny shapes, train. Each run folder keeps the
# profiler's log directory (tfprofile/ or jaxprofile/: TensorBoard opens it; the
# .xplane.pb inside is the raw trace) beside trace.parquet and bench.json.
# Run from the repo root with the project installed (.venv/bin on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
for m in $(traceviz models --names --framework tensorflow) \
         $(traceviz models --names --framework jax); do
  traceviz capture --model "$m" --preset imdb --device cpu \
    --batch 8 --seq 10 --hidden 32 --embed 16 --vocab 200 --warmup 2 --steps 5 \
    --profile-steps 2 --out "sample_traces/tf/$m" --force > /dev/null
  rm -f "sample_traces/tf/$m/runner.log"
  echo "sample_traces/tf/$m"
done
# mixed precision: the Keras mixed_bfloat16 policy (Cast ops in the trace)
traceviz capture --model cudnn_tf --preset imdb --device cpu --amp bf16 \
  --batch 8 --seq 10 --hidden 32 --embed 16 --vocab 200 --warmup 2 --steps 5 \
  --profile-steps 2 --out sample_traces/tf/cudnn_tf_bf16 --force > /dev/null
rm -f sample_traces/tf/cudnn_tf_bf16/runner.log
echo sample_traces/tf/cudnn_tf_bf16
