#!/usr/bin/env bash
# Data-pipeline benchmark (results in docs/PERFORMANCE.md):
#   1. corpus build throughput (pairs/s) from gettext catalogues,
#   2. tokenization throughput (sentences/s) of `deepnet data prepare`,
#   3. the fraction of training steps that waited for data (target: 0 in steady state).
# Usage: bash bench/data_pipeline.sh [RUNS=3] [STEPS=300]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS=${1:-3}
STEPS=${2:-300}
DEEPNET=${DEEPNET:-build/bin/deepnet}
OUT=${OUT:-/tmp/deepnet-bench-data}
LOCALES=${LOCALES:-de,fr,es,it,nl,pl,pt_BR,ru,ja,zh_CN}
rm -rf "$OUT" && mkdir -p "$OUT"
roots=(--root /usr/share/locale)
[ -d data/l10n/extracted ] && roots+=(--root data/l10n/extracted)

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

for i in $(seq "$RUNS"); do
  "$DEEPNET" data build-corpus "${roots[@]}" --out "$OUT/corpus" --locales "$LOCALES" |
    sed -n 's/.*built in .* s, \([0-9.]*\) pairs\/s.*/\1/p' >> "$OUT/corpus.txt"
done
for i in $(seq "$RUNS"); do
  "$DEEPNET" data prepare --corpus "$OUT/corpus" --out "$OUT/shards" --vocab-size 4000 \
    --training-sentences 100000 --max-len 64 |
    sed -n 's/.*(\([0-9.]*\) sentences\/s).*/\1/p' >> "$OUT/tokenize.txt"
done
"$DEEPNET" train --config examples/l10n_demo.yaml --set "data.shard_dir=$OUT/shards" \
  --set "checkpoint.dir=" --set "train.max_minutes=0" --set "train.max_steps=$STEPS" \
  --set train.valid_every=0 --set train.probe_every=0 --set train.log_every=100 | tee "$OUT/train.log"

echo
echo "corpus build  (pairs/s, median of $RUNS):      $(median < "$OUT/corpus.txt")   [$(tr '\n' ' ' < "$OUT/corpus.txt")]"
echo "tokenization  (sentences/s, median of $RUNS):  $(median < "$OUT/tokenize.txt")   [$(tr '\n' ' ' < "$OUT/tokenize.txt")]"
grep -o '[0-9]* of [0-9]* steps waited for data ([0-9.]* s)' "$OUT/train.log" | sed 's/^/data wait     /'
