#!/usr/bin/env bash
# The README demo. Sets DeepNet up, then, on real multilingual text:
#   1. downloads Debian localisation packages (apt-get download, never installed) and builds an
#      English<->X corpus of short plain interface strings (at most 8 English words, no
#      placeholders) from their gettext catalogues (German, French, Spanish by default);
#   2. trains a shared SentencePiece model and writes binarised shards for both directions;
#   3. starts the service on this machine (deepnet-coordinator and two deepnet-worker daemons
#      with two slots each), waits until both workers are ready (`deepnetctl workers`), submits
#      a 3L-3L DeepNorm model as a 2x2 (pipeline x data) job, watches it train, lists its
#      checkpoints and scrapes /metrics;
#   4. scores the test split with BLEU and chrF2 (sacreBLEU-compatible), translates frequent
#      interface strings and test sentences, and ends with a summary.
#
# Knobs (environment):
#   DEMO_MINUTES         training time bound (default 14)
#   DEMO_LOCALES         target languages (default de,fr,es)
#   DEMO_EVAL_SENTENCES  test sentences scored per direction (default 300; 0 = all)
#   DEMO_SPM_SENTENCES   sentences SentencePiece trains on (default 200000)
#   DEMO_SKIP_SETUP=1    do not run scripts/setup.sh (the build in BUILD_DIR must exist)
#   DEMO_WORKER_DELAY_S  start the worker daemons this many seconds late (tests the waiting)
#   DEMO_PORT, DEMO_METRICS_PORT  coordinator ports (default 0: any free port)
#   BUILD_DIR (default build), RUN_DIR (default runs/l10n)
# The service keeps its data under a storage root, RUN_DIR/storage (docs/OPERATIONS.md "Storage
# layout"): shards in datasets/l10n/, checkpoints in users/demo/ (the token's user). Run as root,
# the workers run trainers as the unprivileged account deepnet-trainer (created here when
# setup.sh has not), so the run folder and the trainer must be reachable by it: for a checkout
# under a 0700 folder such as /root the run moves to /var/tmp/deepnet-demo/ (RUN_DIR/run-folder
# names it) with a copy of the trainer.
# Without network access to Debian's archive, step 1 falls back to the catalogues already in
# /usr/share/locale. Exits non-zero unless the job SUCCEEDED and scores were printed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ "${DEMO_SKIP_SETUP:-0}" != 1 ]; then bash scripts/setup.sh; fi
BUILD_DIR=${BUILD_DIR:-build}
RUN_DIR=${RUN_DIR:-runs/l10n}
MINUTES=${DEMO_MINUTES:-14}
LOCALES=${DEMO_LOCALES:-de,fr,es}
EVAL_SENTENCES=${DEMO_EVAL_SENTENCES:-300}
SPM_SENTENCES=${DEMO_SPM_SENTENCES:-200000}
WORKER_DELAY=${DEMO_WORKER_DELAY_S:-0}
VOCAB=4000
DEEPNET="$BUILD_DIR/bin/deepnet"
COORDINATOR="$BUILD_DIR/bin/deepnet-coordinator"
WORKER="$BUILD_DIR/bin/deepnet-worker"
CTL="$BUILD_DIR/bin/deepnetctl"
started=$(date +%s)
say() { echo "[demo] $*"; }
die() { echo "[demo] error: $*" >&2; exit 1; }
for bin in "$DEEPNET" "$COORDINATOR" "$WORKER" "$CTL"; do
  [ -x "$bin" ] || die "$bin is missing: build first (bash scripts/setup.sh)"
done
mkdir -p "$RUN_DIR"
RUN_ABS=$(cd "$RUN_DIR" && pwd)
TRAINER="$(cd "$(dirname "$DEEPNET")" && pwd)/$(basename "$DEEPNET")"  # absolute, for the daemons

# Trainers never run as root: a root demo runs them as deepnet-trainer, which must reach the run
# folder and the trainer binary. A checkout under a 0700 folder (root's home, /root) is out of
# its reach: the run then lives in /var/tmp/deepnet-demo/ (RUN_DIR/run-folder says where) and the
# trainer is a copy there, with its SentencePiece module (it needs only system libraries).
TRAINER_ACCOUNT=()
if [ "$(id -u)" -eq 0 ]; then
  if ! id -u deepnet-trainer >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin deepnet-trainer
  fi
  TRAINER_ACCOUNT=(--trainer-user deepnet-trainer)
  say "trainers run as deepnet-trainer (uid $(id -u deepnet-trainer))"
  reachable() { setpriv --reuid deepnet-trainer --regid deepnet-trainer --clear-groups test -x "$1"; }
  if ! reachable "$RUN_ABS"; then
    away="/var/tmp/deepnet-demo/$(printf '%s' "$RUN_ABS" | sha256sum | cut -c1-12)"
    mkdir -p "$away"
    chmod 755 /var/tmp/deepnet-demo "$away"
    say "$RUN_ABS is not reachable by deepnet-trainer (a 0700 folder above it): the run lives in $away"
    printf '%s\n' "$away" > "$RUN_ABS/run-folder"
    RUN_ABS=$away
  fi
  if ! reachable "$TRAINER"; then
    # The trainer finds its SentencePiece module in ../lib beside it (data/spm_module.cc).
    mkdir -p "$RUN_ABS/bin" "$RUN_ABS/lib"
    install -m 755 "$TRAINER" "$RUN_ABS/bin/deepnet"
    install -m 755 "$BUILD_DIR/data/libdeepnet_spm.so" "$RUN_ABS/lib/"
    TRAINER="$RUN_ABS/bin/deepnet"
  fi
  reachable "$TRAINER" && reachable "$RUN_ABS" ||
    die "$RUN_ABS or $TRAINER is not reachable by the account deepnet-trainer"
fi

echo; echo "== 1. Corpus from gettext catalogues =="
roots=(--root /usr/share/locale)
if "$DEEPNET" data fetch-l10n; then roots+=(--root data/l10n/extracted); else
  say "fetch-l10n failed; using /usr/share/locale only" >&2; fi
"$DEEPNET" data build-corpus "${roots[@]}" --out "$RUN_ABS/corpus" --locales "$LOCALES" \
  --max-source-words 8 --drop-placeholders

echo; echo "== 2. SentencePiece model and binarised shards =="
STORAGE="$RUN_ABS/storage"
SHARDS="$STORAGE/datasets/l10n/shards"
mkdir -p "$STORAGE/users" "$STORAGE/teams" "$(dirname "$SHARDS")"
chmod 755 "$STORAGE" "$STORAGE/users" "$STORAGE/teams"
"$DEEPNET" data prepare --corpus "$RUN_ABS/corpus" --out "$SHARDS" \
  --vocab-size "$VOCAB" --training-sentences "$SPM_SENTENCES" --max-len 32

echo; echo "== 3. The service: a coordinator, two worker daemons (2 slots each) and a 2x2 job =="
SERVICE_DIR="$RUN_ABS/service"
CHECKPOINTS="$STORAGE/users/demo/l10n-checkpoints"
rm -rf "$SERVICE_DIR" "$CHECKPOINTS"
mkdir -p "$SERVICE_DIR"
USER_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s demo user\n' "$USER_TOKEN" > "$SERVICE_DIR/tokens"
# One token per worker daemon, good only for its name (docs/OPERATIONS.md, "Threat model").
for w in 1 2; do
  worker_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  printf '%s demo-w%s worker\n' "$worker_token" "$w" >> "$SERVICE_DIR/tokens"
  printf '%s\n' "$worker_token" > "$SERVICE_DIR/worker-$w.token"
done
chmod 600 "$SERVICE_DIR/tokens" "$SERVICE_DIR"/worker-*.token
sed -e "s|@STORAGE@|$STORAGE|g" -e "s|max_minutes: 14|max_minutes: $MINUTES|" \
  examples/l10n_service.yaml > "$SERVICE_DIR/job.yaml"
"$DEEPNET" inspect --config "$SERVICE_DIR/job.yaml" --vocab-size "$VOCAB"

pids=()
stop_service() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap stop_service EXIT
"$COORDINATOR" --listen "127.0.0.1:${DEMO_PORT:-0}" \
  --metrics-listen "127.0.0.1:${DEMO_METRICS_PORT:-0}" --db "$SERVICE_DIR/coordinator.db" \
  --tokens-file "$SERVICE_DIR/tokens" --port-file "$SERVICE_DIR/ports" --storage-root "$STORAGE" \
  > "$SERVICE_DIR/coordinator.log" 2>&1 &
pids+=($!)
# The port file appears once the coordinator serves (it is written atomically).
for _ in $(seq 300); do
  [ -f "$SERVICE_DIR/ports" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$SERVICE_DIR/coordinator.log" >&2; die "the coordinator exited"; }
  sleep 0.1
done
[ -f "$SERVICE_DIR/ports" ] || { cat "$SERVICE_DIR/coordinator.log" >&2; die "the coordinator did not start"; }
PORT=$(sed -n 's/^grpc=//p' "$SERVICE_DIR/ports")
METRICS_PORT=$(sed -n 's/^metrics=//p' "$SERVICE_DIR/ports")
say "coordinator serving on 127.0.0.1:$PORT (metrics :$METRICS_PORT)"
export DEEPNET_COORDINATOR="127.0.0.1:$PORT" DEEPNET_TOKEN="$USER_TOKEN"
for w in 1 2; do
  (
    if [ "$WORKER_DELAY" != 0 ]; then sleep "$WORKER_DELAY"; fi
    exec "$WORKER" --coordinator "127.0.0.1:$PORT" --name "demo-w$w" \
      --slots 2 --work-dir "$SERVICE_DIR/w$w" --trainer "$TRAINER" \
      --token-file "$SERVICE_DIR/worker-$w.token" --listen 127.0.0.1:0 \
      --storage-root "$STORAGE" "${TRAINER_ACCOUNT[@]}"
  ) > "$SERVICE_DIR/worker-$w.log" 2>&1 &
  pids+=($!)
done

# Waits until two ready workers offer the 2x2 gang's 4 slots, by asking the coordinator
# (`deepnetctl workers`), never with a guessed sleep; a worker daemon that exits, or 120 s
# without both, ends the demo with the workers' logs.
if ! CTL="$CTL" bash scripts/wait_for_workers.sh 2 4 "${DEMO_WORKER_TIMEOUT_S:-120}" "${pids[1]}" "${pids[2]}"; then
  tail -n 20 "$SERVICE_DIR"/worker-*.log >&2
  die "the worker daemons did not become ready"
fi

JOB=$("$CTL" submit "$SERVICE_DIR/job.yaml" -o json | sed -n 's/.*"job_id": *"\([^"]*\)".*/\1/p' | head -1)
[ -n "$JOB" ] || die "submit returned no job id"
say "submitted job $JOB; watching it train (logs in $SERVICE_DIR)"
"$CTL" watch "$JOB" || true
"$CTL" get "$JOB"
STATE=$("$CTL" get "$JOB" -o json | sed -n 's/.*"state": *"\([A-Z_]*\)".*/\1/p' | head -1)
if [ "$STATE" != "JOB_STATE_SUCCEEDED" ] && [ "$STATE" != "SUCCEEDED" ]; then
  "$CTL" logs "$JOB" --tail-bytes 4000 >&2 || true
  die "job $JOB ended $STATE, not SUCCEEDED (its trainers' output is above; deepnetctl logs $JOB)"
fi
echo "-- checkpoints on shared storage:"
"$CTL" checkpoints "$JOB"
echo "-- Prometheus metrics (GET http://127.0.0.1:$METRICS_PORT/metrics, saved to $SERVICE_DIR/metrics.txt):"
exec 3<>"/dev/tcp/127.0.0.1/$METRICS_PORT"
printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
cat <&3 > "$SERVICE_DIR/metrics.txt"
exec 3<&-
grep -E '^deepnet_(jobs|workers|job_restarts_total|job_time_to_running_seconds_count|jobs_submitted_total)' \
  "$SERVICE_DIR/metrics.txt" || true
stop_service
trap - EXIT
train_done=$(date +%s)

echo; echo "== 4. BLEU and chrF2 on the test split =="
"$DEEPNET" eval --checkpoint "$CHECKPOINTS" --test-dir "$RUN_ABS/corpus" \
  --max-sentences "$EVAL_SENTENCES" --beam 4 | tee "$RUN_ABS/scores.txt"
grep -q "avg en->X" "$RUN_ABS/scores.txt" || die "deepnet eval printed no scores"
: > "$RUN_ABS/translations.txt"
IFS=, read -r -a locale_list <<< "$LOCALES"
ui_strings=$'Open file\nSave the document\nPrint\nCopy link location\nClose window\nSelect All\nNew Folder\nPreferences'
for lang in "${locale_list[@]}"; do
  {
    echo "-- en -> $lang:"
    paste -d'\t' <(printf '%s\n' "$ui_strings") \
      <(printf '%s\n' "$ui_strings" | "$DEEPNET" translate --checkpoint "$CHECKPOINTS" --to "$lang" --beam 4) |
      sed 's/\t/  =>  /'
    echo "-- $lang -> en (test sentences; reference in brackets):"
    head -n 3 "$RUN_ABS/corpus/test.$lang.tsv" | cut -f4 > "$RUN_ABS/src.$lang.txt"
    head -n 3 "$RUN_ABS/corpus/test.$lang.tsv" | cut -f3 > "$RUN_ABS/ref.$lang.txt"
    paste -d'\t' "$RUN_ABS/src.$lang.txt" \
      <("$DEEPNET" translate --checkpoint "$CHECKPOINTS" --to en --beam 4 < "$RUN_ABS/src.$lang.txt") \
      "$RUN_ABS/ref.$lang.txt" | awk -F'\t' '{printf "%s  =>  %s  [%s]\n", $1, $2, $3}'
  } | tee -a "$RUN_ABS/translations.txt"
done

finished=$(date +%s)
echo; echo "== Summary =="
echo "job $JOB SUCCEEDED: 3L-3L DeepNorm, 2 pipeline stages x 2 data-parallel replicas on 2 worker daemons"
echo "wall time: $(( (finished - started) / 60 )) min $(( (finished - started) % 60 )) s in all," \
  "$(( (train_done - started) / 60 )) min to the end of training"
sed -n '/^direction/,$p' "$RUN_ABS/scores.txt"
echo "translations:  $RUN_ABS/translations.txt"
echo "checkpoints:   $CHECKPOINTS"
echo "service logs:  $SERVICE_DIR/{coordinator,worker-1,worker-2}.log; trainers' output in $SERVICE_DIR/w1, w2"
echo "metrics:       $SERVICE_DIR/metrics.txt (scraped from the coordinator's /metrics)"
