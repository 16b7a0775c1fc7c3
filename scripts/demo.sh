#!/usr/bin/env bash
# The README demo. Sets DeepNet up, then, on real multilingual text:
#   1. downloads Debian localisation packages (apt-get download, never installed) and builds an
#      English<->X corpus for 10 locales from their gettext catalogues;
#   2. trains a shared SentencePiece model and writes binarised shards;
#   3. starts the service on this machine (deepnet-coordinator and two deepnet-worker daemons
#      with two slots each), submits the 6L-6L DeepNorm model as a 2x2 (pipeline x data) job
#      with deepnetctl, watches it train, lists its checkpoints and scrapes /metrics;
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

echo; echo "== 3. The service: a coordinator, two worker daemons (2 slots each) and a 2x2 job =="
"$DEEPNET" inspect --config examples/l10n_demo.yaml --vocab-size 4000
RUN_ABS=$(cd "$RUN_DIR" && pwd)
SERVICE_DIR="$RUN_ABS/service"
rm -rf "$SERVICE_DIR" "$RUN_ABS/service-checkpoints"
mkdir -p "$SERVICE_DIR"
PORT=${DEMO_PORT:-7070}
METRICS_PORT=${DEMO_METRICS_PORT:-9464}
USER_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
WORKER_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s demo user\n%s workers worker\n' "$USER_TOKEN" "$WORKER_TOKEN" > "$SERVICE_DIR/tokens"
printf '%s\n' "$WORKER_TOKEN" > "$SERVICE_DIR/worker.token"
sed -e "s|@RUN_DIR@|$RUN_ABS|g" -e "s|max_minutes: 8|max_minutes: $MINUTES|" \
  examples/l10n_service.yaml > "$SERVICE_DIR/job.yaml"
pids=()
stop_service() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_service EXIT
"$BUILD_DIR/coordinator/deepnet-coordinator" --listen "127.0.0.1:$PORT" \
  --metrics-listen "127.0.0.1:$METRICS_PORT" --db "$SERVICE_DIR/coordinator.db" \
  --tokens-file "$SERVICE_DIR/tokens" --port-file "$SERVICE_DIR/ports" \
  2> "$SERVICE_DIR/coordinator.log" &
pids+=($!)
for _ in $(seq 100); do [ -f "$SERVICE_DIR/ports" ] && break; sleep 0.1; done
[ -f "$SERVICE_DIR/ports" ] || { cat "$SERVICE_DIR/coordinator.log"; exit 1; }
for w in 1 2; do
  "$BUILD_DIR/worker/daemon/deepnet-worker" --coordinator "127.0.0.1:$PORT" --name "demo-w$w" \
    --slots 2 --work-dir "$SERVICE_DIR/w$w" --trainer "$PWD/$DEEPNET" \
    --token-file "$SERVICE_DIR/worker.token" --listen 127.0.0.1:0 \
    2> "$SERVICE_DIR/worker-$w.log" &
  pids+=($!)
done
export DEEPNET_COORDINATOR="127.0.0.1:$PORT" DEEPNET_TOKEN="$USER_TOKEN"
CTL="$BUILD_DIR/coordinator/ctl/deepnetctl"
JOB=$("$CTL" submit "$SERVICE_DIR/job.yaml" -o json | sed -n 's/.*"job_id": *"\([^"]*\)".*/\1/p' | head -1)
echo "[demo] submitted job $JOB; watching it train (logs in $SERVICE_DIR)"
"$CTL" watch "$JOB"
"$CTL" get "$JOB"
echo "-- checkpoints on shared storage:"
"$CTL" checkpoints "$JOB"
echo "-- Prometheus metrics (GET http://127.0.0.1:$METRICS_PORT/metrics):"
exec 3<>"/dev/tcp/127.0.0.1/$METRICS_PORT"
printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
grep -E '^deepnet_(jobs|workers|job_restarts_total|job_time_to_running_seconds_count|jobs_submitted_total)' <&3 || true
exec 3<&-
stop_service
trap - EXIT
CHECKPOINTS="$RUN_ABS/service-checkpoints"

echo; echo "== 4. BLEU and chrF2 on the test split (first 40 sentences per direction) =="
"$DEEPNET" eval --checkpoint "$CHECKPOINTS" --test-dir "$RUN_DIR/corpus" \
  --max-sentences 40 --beam 4
for lang in de fr ja; do
  echo "-- en -> $lang:"
  printf 'Open file\nSave the document\nPrint\nCopy link location\n' |
    "$DEEPNET" translate --checkpoint "$CHECKPOINTS" --to "$lang" --beam 4
done
