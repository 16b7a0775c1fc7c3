#!/usr/bin/env bash
# Sets up DeepNet, trains a small DeepNet (6L-6L, DeepNorm) on the generated multilingual task
# for a few minutes, printing progress and checkpointing, then translates a few sentences.
#   DEMO_MINUTES=2 bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
RUN_DIR=${RUN_DIR:-runs/demo}
MINUTES=${DEMO_MINUTES:-4}
DEEPNET="$BUILD_DIR/worker/deepnet"

echo
echo "== The model: alpha/beta and sizes (deepnet inspect) =="
"$DEEPNET" inspect --config examples/demo.yaml --vocab-size 265  # bytes + specials + 5 language tags

echo
echo "== Training for up to $MINUTES minutes (checkpoints in $RUN_DIR) =="
"$DEEPNET" train --config examples/demo.yaml --set "checkpoint.dir=$RUN_DIR" \
  --set "train.max_minutes=$MINUTES"

echo
echo "== Translating with the latest checkpoint =="
sentences=$'the small cat sat\ngood morning my friend\nopen the window'
for lang in cp cap rev pig gr; do
  echo "-- to <2$lang>:"
  paste -d'\t' <(printf '%s\n' "$sentences") \
    <(printf '%s\n' "$sentences" | "$DEEPNET" translate --checkpoint "$RUN_DIR" --to "$lang" --beam 4) |
    sed 's/\t/  =>  /'
done
