#!/usr/bin/env bash
# The README's main command, shortened (ctest -L demo): scripts/demo.sh on the same code path and
# service layout (coordinator, two worker daemons started late on purpose, a 2x2 gang), with a
# short training time (1.5 minutes: the flow, not the quality, is checked here; CI time is a
# budget) and fewer test sentences. Fails unless the job SUCCEEDED, scores were
# printed for every direction and the summary was written.
#
#   tests/demo/demo_test.sh BUILD_DIR RUN_DIR
set -euo pipefail
build_dir=$1 run_dir=$2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rm -rf "$run_dir"
mkdir -p "$run_dir"
log="$run_dir/demo.log"
status=0
DEMO_SKIP_SETUP=1 BUILD_DIR="$build_dir" RUN_DIR="$run_dir" \
  DEMO_MINUTES="${DEMO_MINUTES:-1.5}" DEMO_EVAL_SENTENCES="${DEMO_EVAL_SENTENCES:-40}" \
  DEMO_SPM_SENTENCES="${DEMO_SPM_SENTENCES:-60000}" DEMO_WORKER_DELAY_S="${DEMO_WORKER_DELAY_S:-4}" \
  bash "$repo/scripts/demo.sh" > "$log" 2>&1 || status=$?
# The run's own output goes to $log only: CI shows the head of a failing test's output, so a
# failure prints its reason first, then the tails that explain it (the demo's last lines and
# the service's logs), and a success prints the summary.
out_dir=$run_dir
if [ -f "$run_dir/run-folder" ]; then out_dir=$(cat "$run_dir/run-folder"); fi
diagnose() {
  echo "--- the last 60 lines of $log:"
  tail -n 60 "$log"
  for f in "$out_dir"/service/coordinator.log "$out_dir"/service/worker-*.log; do
    if [ -f "$f" ]; then echo "--- the last 25 lines of $f:"; tail -n 25 "$f"; fi
  done
}
fail() { echo "demo_test: FAILED: $*" >&2; diagnose >&2; exit 1; }
[ "$status" -eq 0 ] || fail "scripts/demo.sh exited $status"
grep -q "SUCCEEDED" "$log" || fail "the job did not reach SUCCEEDED"
grep -q "workers ready\|ready workers" "$log" || fail "the demo did not wait for its workers"
for dir in en-de de-en en-fr fr-en en-es es-en; do
  grep -Eq "^$dir +[0-9]+ +[0-9.]+ +[0-9.]+$" "$log" || fail "no BLEU/chrF2 line for $dir"
done
grep -q "^== Summary ==" "$log" || fail "no summary"
# A checkout the trainer account cannot reach keeps the run elsewhere (scripts/demo.sh).
grep -q "=>" "$out_dir/translations.txt" || fail "no translations"
sed -n '/^== Summary ==/,$p' "$log"
if [ "$out_dir" != "$run_dir" ]; then rm -rf "$out_dir"; fi
echo "demo_test: passed"
