#!/usr/bin/env bash
# Device run for issue 15 (first of two): builds the trainer against the GPU machine's PyTorch
# with scripts/gpu_check.sh, gets the stack trace of the GPU checkpoint crash, times a step of
# 64-128-2 models at several depths, then trains 100L-100L Post-LN and DeepNorm side by side on
# the one GPU for a fixed time (longer than 1,000 steps, with and without the paper's warm-up).
#   bash scripts/gpu_long_runs.sh            (OUT set by the device tool; RUN_MIN per run)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/.cache/gpu-long-out}; mkdir -p "$OUT"
RUNS=$OUT/runs; mkdir -p "$RUNS"
SET=${SET:-sweep}  # sweep: 18/50/100 layers x 2 lr x 2 norms; long100: 100L only, 4 runs
RUN_MIN=${RUN_MIN:-3}
T0=$(date +%s)
KIT_BUDGET_S=${KIT_BUDGET_S:-330} bash scripts/gpu_check.sh --targets "deepnet deepnet_gpu_test" \
  --no-tests --no-bench >"$OUT/kit.log" 2>&1
cat "$OUT/summary.txt"
B=build-gpu/bin
[ -x $B/deepnet ] || { echo "no deepnet binary"; tail -40 "$OUT/build.log" 2>/dev/null; exit 1; }
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp/deepnet-gpu-prefix/usr/lib/x86_64-linux-gnu
echo "build done after $(($(date +%s) - T0)) s"
# 1. The checkpoint crash: its stack trace (backgrounded; bounded).
GT=$(find build-gpu -name deepnet_gpu_test -type f | head -1)
(timeout 40 $GT --gtest_filter='GpuTest.CheckpointRoundTripsCudaTensors' \
   >"$OUT/gpu_ckpt_test.log" 2>&1; echo "rc $?" >>"$OUT/gpu_ckpt_test.log") &
# 2. Long 100L-100L runs, all at once on the one GPU, fp32, no checkpoints.
cat >"$OUT/base.yaml" <<'YAML'
name: long100
model: {encoder_layers: 100, decoder_layers: 100, d_model: 64, heads: 2, ffn_dim: 128, dropout: 0.0, max_positions: 256}
data:
  source: synthetic
  synthetic: {pairs_per_language: 2000, min_words: 2, max_words: 6, seed: 1}
  max_tokens: 2048
  max_len: 128
optim: {lr: 5.0e-4, warmup_steps: 0, warmup_init_lr: 5.0e-4}
train: {max_steps: 100000, log_every: 50, probe_every: 0, valid_every: 100, valid_max_pairs: 100}
checkpoint: {dir: ""}
runtime: {device: cuda, precision: fp32}
YAML
run() {  # name overrides...
  local name=$1; shift
  $B/deepnet train --config "$OUT/base.yaml" --log-format json --set train.max_minutes=$RUN_MIN \
    --set name=$name "$@" >"$RUNS/$name.jsonl" 2>"$RUNS/$name.err" &
}
for norm in post_ln deepnorm; do
  if [ "$SET" = long100 ]; then
    run ${norm}_100L_lr5e-4 --set model.norm=$norm
    run ${norm}_100L_lr5e-4_warm1000 --set model.norm=$norm --set optim.warmup_steps=1000 \
      --set optim.warmup_init_lr=1e-7
    continue
  fi
  for L in 18 50 100; do
    d="--set model.encoder_layers=$L --set model.decoder_layers=$L --set model.norm=$norm"
    run ${norm}_${L}L_lr5e-4 $d
    run ${norm}_${L}L_lr1e-3 $d --set optim.lr=1e-3 --set optim.warmup_init_lr=1e-3
  done
  run ${norm}_100L_lr5e-4_warm4000 --set model.norm=$norm --set optim.warmup_steps=4000 \
    --set optim.warmup_init_lr=1e-7
done
# 3. Step time per depth alone would need an idle GPU; sample it with the runs in flight instead.
sleep 5; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv >"$OUT/smi.txt" 2>&1
wait
for f in "$RUNS"/*.jsonl; do
  echo "== $(basename $f): $(grep -c '"event":"step"' $f) step lines; last valid: $(grep '"event":"valid"' $f | tail -1)"
  tail -2 "${f%.jsonl}.err"
done
tail -30 "$OUT/gpu_ckpt_test.log"
tar czf "$OUT/runs.tgz" -C "$OUT" runs && rm -rf "$RUNS"
echo "total $(($(date +%s) - T0)) s"
