#!/usr/bin/env bash
# GPU evidence: the optimization ladder (WORK/ladder/, for sample_traces/gpu-ladder/), every
# PyTorch variant on ptb_lm (train and forward; FP32, --amp fp16,
# --amp bf16), a deepbench-style batch sweep and an AMP sweep over hidden x timesteps.
#
#   bash sample_traces/make_gpu.sh WORK [SECONDS]
#
# Run from the repo root on a CUDA machine with the project installed. Captures land in
# WORK/<variant>[-<amp>]/<mode>/ and WORK/sweep-{batch,amp}/. A capture already present
# under sample_traces/gpu/ is skipped and a sweep resumes from the sweep.parquet there,
# so the work can be split over several machines; SECONDS stops starting new work after
# that long. With PACK=DIR the results (Parquet, bench/meta/config JSON, logs, the raw
# Kineto traces of the runs in RAW below) are re-packed into DIR/res.tar.NN (15 MB parts)
# after every capture, for a machine whose files come back only from one folder.
set -uo pipefail
work=${1:?usage: make_gpu.sh WORK [SECONDS]}
budget=${2:-1000000}
device=${DEVICE:-cuda}  # DEVICE=cpu: a smoke run of this script
done_dir=sample_traces/gpu
variants=$(python3 -m traceviz models --names --framework torch --device "$device")
# raw Kineto traces kept (the rest are large and re-derivable from the same command)
RAW=" cudnn_torch/train fine_torch/train jit_torch/train compile_torch/train graph_torch/train cudnn_torch-bf16/train fine_torch-fp16/train "
mkdir -p "$work/logs"
t0=$SECONDS

left() { echo $(( budget - (SECONDS - t0) )); }

pack() {
  [ -n "${PACK:-}" ] || return 0
  rm -f "$PACK"/res.tar.*
  tar -cf - -C "$work" --exclude='*.tmp' . | split -b 15000000 -d - "$PACK/res.tar."
}

capture() {  # variant mode amp
  local m=$1 mode=$2 amp=$3 name=$1
  [ "$amp" != none ] && name="$m-$amp"
  [ -f "$done_dir/$name/$mode/trace.parquet" ] && return 0
  [ "$(left)" -gt 30 ] || return 1
  local t=$(( $(left) < 300 ? $(left) : 300 ))
  local args=(--model "$m" --preset ptb_lm --mode "$mode" --device "$device"
              --out "$work/$name/$mode" --force)
  [ "$amp" != none ] && args+=(--amp "$amp")
  echo "traceviz capture ${args[*]}" >> "$work/commands.txt"
  local s=$SECONDS
  if timeout --signal=INT "$t" python3 -m traceviz capture "${args[@]}" \
      > "$work/logs/$name-$mode.log" 2>&1; then
    echo "ok     $name/$mode $((SECONDS - s))s" | tee -a "$work/progress.txt"
  else
    echo "FAILED $name/$mode $((SECONDS - s))s" | tee -a "$work/progress.txt"
  fi
  case "$RAW" in *" $name/$mode "*) ;; *) rm -f "$work/$name/$mode"/trace.pt.trace.json.gz ;; esac
  pack
}

sweep() {  # name, then traceviz sweep arguments
  local name=$1; shift
  mkdir -p "$work/$name"
  [ -f "$done_dir/$name/sweep.parquet" ] && cp "$done_dir/$name/sweep.parquet" "$work/$name/"
  [ "$(left)" -gt 30 ] || return 1
  echo "traceviz sweep $* --device "$device" --out $work/$name --resume" >> "$work/commands.txt"
  local s=$SECONDS
  # SIGINT ends a sweep cleanly: sweep.parquet is rewritten after every point
  timeout --signal=INT "$(left)" python3 -m traceviz sweep "$@" --device "$device" \
      --out "$work/$name" --resume > "$work/logs/$name.log" 2>&1
  echo "sweep  $name rc=$? $((SECONDS - s))s" | tee -a "$work/progress.txt"
  find "$work/$name" -name 'trace.pt.trace.json.gz' -delete
  pack
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"cudnn", torch.backends.cudnn.version())'; } > "$work/machine.txt" 2>&1

ladder() {  # the CUDA LSTM study's ladder: eager and graph-replayed, 3 repeats interleaved
  [ -f sample_traces/gpu-ladder/repeat-1/naive8_torch/bench.json ] && return 0
  [ "$(left)" -gt 120 ] || return 1
  echo "traceviz ladder --device $device --repeat 3 --out $work/ladder --json" >> "$work/commands.txt"
  local s=$SECONDS
  timeout --signal=INT "$(left)" python3 -m traceviz ladder --device "$device" --repeat 3 \
      --out "$work/ladder" --force --json > "$work/ladder.json" 2> "$work/logs/ladder.log"
  echo "ladder rc=$? $((SECONDS - s))s" | tee -a "$work/progress.txt"
  # raw traces of three rungs kept (the last repeat's); the Parquet files hold the rest
  find "$work/ladder" -name 'trace.pt.trace.json.gz' ! -path '*/repeat-3/naive8_torch/*' \
      ! -path '*/repeat-3/fused_torch/*' ! -path '*/repeat-3/fused_torch-graph/*' -delete
  pack
}

ladder
for m in $variants; do capture "$m" train none; done
for m in $variants; do capture "$m" forward none; done
sweep sweep-batch --models cudnn_torch,fine_torch,jit_torch,compile_torch,graph_torch \
  --preset deepbench --batch 16,32,64,128,256 --hidden 512 --seq 100
for amp in bf16 fp16; do for m in $variants; do capture "$m" train "$amp"; done; done
sweep sweep-amp --models cudnn_torch,jit_torch --preset rnn_bench \
  --hidden 256,1024,2048 --seq 10,100 --amp none,fp16,bf16
for amp in bf16 fp16; do for m in $variants; do capture "$m" forward "$amp"; done; done
pack
cat "$work/progress.txt"
