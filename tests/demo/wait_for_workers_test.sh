#!/usr/bin/env bash
# scripts/wait_for_workers.sh, the demo's wait for its worker daemons (ctest -L demo), against a
# real coordinator on a loopback port chosen at run time:
#   1. no worker ever comes: it gives up after its timeout, exit 1, saying what it waited for;
#   2. a worker daemon that exits at once: exit 1 naming it, without waiting for the timeout;
#   3. two workers started late on purpose: it returns 0 only after both registered (the
#      coordinator's own `deepnetctl workers` lists them as ready).
#
#   tests/demo/wait_for_workers_test.sh BUILD_DIR WORK_DIR
set -euo pipefail
build_dir=$(cd "$1" && pwd) work=$2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
wait_script="$repo/scripts/wait_for_workers.sh"
export CTL="$build_dir/bin/deepnetctl"
rm -rf "$work"; mkdir -p "$work"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
fail() { echo "wait_for_workers_test: FAILED: $*" >&2; exit 1; }

user_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
worker_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
# A pool token: the workers of this test start under several names (tokens file `workers=`).
printf '%s tester user\n%s workers worker workers=*\n' "$user_token" "$worker_token" > "$work/tokens"
printf '%s\n' "$worker_token" > "$work/worker.token"
"$build_dir/bin/deepnet-coordinator" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --db "$work/coordinator.db" --tokens-file "$work/tokens" --port-file "$work/ports" \
  > "$work/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do [ -f "$work/ports" ] && break; sleep 0.1; done
[ -f "$work/ports" ] || { cat "$work/coordinator.log" >&2; fail "the coordinator did not start"; }
port=$(sed -n 's/^grpc=//p' "$work/ports")
export DEEPNET_COORDINATOR="127.0.0.1:$port" DEEPNET_TOKEN="$user_token"
start_worker() {  # name delay_s
  (
    sleep "$2"
    exec "$build_dir/bin/deepnet-worker" --coordinator "127.0.0.1:$port" --name "$1" \
      --slots 2 --work-dir "$work/$1" --trainer "$build_dir/bin/deepnet" \
      --token-file "$work/worker.token" --listen 127.0.0.1:0
  ) > "$work/$1.log" 2>&1 &
  pids+=($!)
}

# 1. Nobody comes.
status=0
bash "$wait_script" 2 4 2 > "$work/case1.out" 2>&1 || status=$?
[ "$status" -eq 1 ] || fail "case 1: exit $status, expected 1"
grep -q "need 2 ready workers with 4 free slots" "$work/case1.out" || fail "case 1: $(cat "$work/case1.out")"

# 2. A worker daemon that exits at once (a flag it does not know).
"$build_dir/bin/deepnet-worker" --no-such-flag 2> /dev/null &
dead=$!
status=0
bash "$wait_script" 1 2 600 "$dead" > "$work/case2.out" 2>&1 || status=$?
[ "$status" -eq 1 ] || fail "case 2: exit $status, expected 1"
grep -q "pid $dead) exited" "$work/case2.out" || fail "case 2: $(cat "$work/case2.out")"

# 3. Two workers, 3 and 5 s late.
start_worker late-w1 3
start_worker late-w2 5
bash "$wait_script" 2 4 120 "${pids[1]}" "${pids[2]}" > "$work/case3.out" 2>&1 ||
  fail "case 3: $(cat "$work/case3.out"; tail -n 5 "$work"/late-w*.log)"
grep -q "2 ready workers, 4 free slots" "$work/case3.out" || fail "case 3: $(cat "$work/case3.out")"
ready=$("$CTL" workers -o json | jq '[.workers[] | select(.state == "WORKER_STATE_READY")] | length')
[ "$ready" -eq 2 ] || fail "case 3: the coordinator lists $ready ready workers after the wait"
echo "wait_for_workers_test: passed"
