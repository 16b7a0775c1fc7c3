#!/usr/bin/env bash
# The README demo. Sets DeepNet up, then, on real multilingual text:
#   1. downloads Debian localisation packages (apt-get download, never installed) and builds an
#      English<->X corpus for 10 locales from their gettext catalogues;
#   2. trains a shared SentencePiece model and writes binarised shards;
#   3. trains a 6L-6L DeepNorm model for a few minutes (progress, validation loss, checkpoints);
#   4. scores the test split with BLEU and chrF2 (sacreBLEU-compatible) and translates a few
#      sentences.
# DEMO_MINUTES (default 8) bounds the training. Without network access to Debian's archive, step 1
# falls back to the catalogues already in /usr/share/locale.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
RUN_DIR=${RUN_DIR:-runs/l10n}
MINUTES=${DEMO_MINUTES:-8}
LOCALES=${DEMO_LOCALES:-de,fr,es,it,nl,pl,pt_BR,ru,ja,zh_CN}
DEEPNET="$BUILD_DIR/worker/deepnet"

echo; echo "== 1. Corpus from gettext catalogues =="
roots=(--root /usr/share/locale)
if "$DEEPNET" data fetch-l10n; then roots+=(--root data/l10n/extracted); else
  echo "[demo] fetch-l10n failed; using /usr/share/locale only" >&2; fi
"$DEEPNET" data build-corpus "${roots[@]}" --out "$RUN_DIR/corpus" --locales "$LOCALES"

echo; echo "== 2. SentencePiece model and binarised shards =="
"$DEEPNET" data prepare --corpus "$RUN_DIR/corpus" --out "$RUN_DIR/shards" --vocab-size 4000 \
  --training-sentences 100000 --max-len 64

echo; echo "== 3. The model (deepnet inspect) and training for up to $MINUTES minutes =="
"$DEEPNET" inspect --config examples/l10n_demo.yaml --vocab-size 4000
"$DEEPNET" train --config examples/l10n_demo.yaml --set "data.shard_dir=$RUN_DIR/shards" \
  --set "checkpoint.dir=$RUN_DIR/checkpoints" --set "train.max_minutes=$MINUTES"

echo; echo "== 4. BLEU and chrF2 on the test split (first 40 sentences per direction) =="
"$DEEPNET" eval --checkpoint "$RUN_DIR/checkpoints" --test-dir "$RUN_DIR/corpus" \
  --max-sentences 40 --beam 4
for lang in de fr ja; do
  echo "-- en -> $lang:"
  printf 'Open file\nSave the document\nPrint\nCopy link location\n' |
    "$DEEPNET" translate --checkpoint "$RUN_DIR/checkpoints" --to "$lang" --beam 4
done
