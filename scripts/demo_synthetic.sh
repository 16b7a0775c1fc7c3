#!/usr/bin/env bash
# A self-contained demo needing no data at all: a 6L-6L DeepNorm model learns five generated
# pseudo-languages (word reversal, capitalisation, Greek transliteration, pig latin, copy) in a
# few minutes, then translates into each.   DEMO_MINUTES=2 bash scripts/demo_synthetic.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
RUN_DIR=${RUN_DIR:-runs/demo}
MINUTES=${DEMO_MINUTES:-4}
DEEPNET="$BUILD_DIR/bin/deepnet"
"$DEEPNET" inspect --config examples/demo.yaml --vocab-size 265
"$DEEPNET" train --config examples/demo.yaml --set "checkpoint.dir=$RUN_DIR" \
  --set "train.max_minutes=$MINUTES"
sentences=$'the small cat sat\ngood morning my friend\nopen the window'
for lang in cp cap rev pig gr; do
  echo "-- to <2$lang>:"
  paste -d'\t' <(printf '%s\n' "$sentences") \
    <(printf '%s\n' "$sentences" | "$DEEPNET" translate --checkpoint "$RUN_DIR" --to "$lang" --beam 4) |
    sed 's/\t/  =>  /'
done
