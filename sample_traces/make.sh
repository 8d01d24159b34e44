#!/usr/bin/env bash
# Regenerates the .parquet files here from their raw traces (run from the repo root).
# Raw traces: facebookresearch/HolisticTraceAnalysis tests/data (MIT License,
# Copyright (c) Meta Platforms, Inc. and affiliates), via ../shared/traces/kineto/.
set -euo pipefail
cd "$(dirname "$0")/.."
for f in a100_alexnet mi250_rocm_train a100_triton_culaunchkernel ampere_sampled_rank0; do
  traceviz import "sample_traces/kineto/$f.json.gz" -o "sample_traces/kineto/$f.parquet" --force
done
# bigger raw files stay in ../shared; only their tables are kept here
for f in a100_diff_control v100_19k_kernels; do
  traceviz import "../shared/traces/kineto/$f.json.gz" -o "sample_traces/kineto/$f.parquet" --force
done
