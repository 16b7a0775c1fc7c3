#!/usr/bin/env bash
# The checks of an installed DeepNet, one script for both places that run them: the install test
# (tests/install/install_test.sh, on `cmake --install` into a temporary prefix) and the image
# smoke test (scripts/image_smoke.sh, inside the image's root file system, prefix /usr/local, as
# the image's user). Everything runs from PREFIX alone, in WORK_DIR:
#   1. every program answers --version with VERSION (its libraries resolve) and --help;
#   2. with TRAIN=1, `deepnet train` on the installed example synthetic_small.yaml:
#      --validate-config, then two steps to a checkpoint (LibTorch loads);
#   3. the service: a coordinator and a worker that finds its trainer beside itself start;
#      PREFIX/libexec/deepnet/wait_for_workers.sh, run with PATH=/usr/bin:/bin, finds
#      PREFIX/bin/deepnetctl on its own and sees the worker READY; both daemons answer the gRPC
#      health check that kubelet's probes make (`deepnetctl health`: SERVING, without a token);
#      the coordinator's /metrics counts one ready worker.
#
#   bash scripts/check_installed.sh PREFIX VERSION WORK_DIR TRAIN
#
# Exit 0 when all pass, else 1 with "check_installed: FAILED: ..." and the relevant log lines.
# The daemons it starts are stopped on every exit.
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: $0 PREFIX VERSION WORK_DIR TRAIN(1|0)" >&2
  exit 2
fi
prefix=$1 version=$2 work=$3 train=$4
bin=$prefix/bin
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
say() { echo "check_installed: $*"; }
fail() { echo "check_installed: FAILED: $*" >&2; exit 1; }
mkdir -p "$work"
cd "$work"

# 1. --version and --help.
for program in deepnet deepnet-coordinator deepnet-worker deepnetctl; do
  out=$("$bin/$program" --version) || fail "$program --version exited $?"
  [[ $out == "$version"* ]] || fail "$program --version printed '$out', expected $version"
  "$bin/$program" --help > "$program.help" || fail "$program --help exited $?"
done
say "all four programs print $version and their --help"

# 2. The trainer on an installed example.
if [ "$train" = 1 ]; then
  example=$prefix/share/deepnet/examples/synthetic_small.yaml
  "$bin/deepnet" train --config "$example" --validate-config > validate.out ||
    fail "--validate-config on $example"
  "$bin/deepnet" train --config "$example" --set train.max_steps=2 \
    --set checkpoint.dir="$work/checkpoints" > train.log 2>&1 ||
    { tail train.log >&2; fail "deepnet train"; }
  [ -d checkpoints/step_000000002 ] || fail "no checkpoint at step 2"
  say "deepnet train wrote checkpoints/step_000000002"
fi

# 3. The service.
user_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
worker_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s tester user\n%s installed worker\n' "$user_token" "$worker_token" > tokens
printf '%s\n' "$worker_token" > worker.token
"$bin/deepnet-coordinator" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --db coordinator.db --tokens-file tokens --port-file ports > coordinator.log 2>&1 &
pids+=($!)
for _ in $(seq 300); do [ -f ports ] && break; sleep 0.1; done
[ -f ports ] || { cat coordinator.log >&2; fail "the coordinator did not start"; }
port=$(sed -n 's/^grpc=//p' ports) metrics=$(sed -n 's/^metrics=//p' ports)
export DEEPNET_COORDINATOR="127.0.0.1:$port" DEEPNET_TOKEN="$user_token"
unset CTL   # wait_for_workers.sh must find PREFIX/bin/deepnetctl itself
"$bin/deepnet-worker" --coordinator "127.0.0.1:$port" --name installed --slots 1 \
  --work-dir worker --token-file worker.token --listen 127.0.0.1:0 > worker.log 2>&1 &
pids+=($!)
PATH=/usr/bin:/bin bash "$prefix/libexec/deepnet/wait_for_workers.sh" 1 1 60 "${pids[1]}" \
  > wait.out 2>&1 ||
  fail "the worker did not become ready: $(cat wait.out; tail -n 5 worker.log coordinator.log)"
worker_port=$(sed -n 's/.*health on port \([0-9]*\).*/\1/p' worker.log)
for address in "127.0.0.1:$port" "127.0.0.1:$worker_port"; do
  [ "$(DEEPNET_TOKEN= "$bin/deepnetctl" health "$address")" = SERVING ] ||
    fail "deepnetctl health $address"
done
exec 3<>"/dev/tcp/127.0.0.1/$metrics"
printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
page=$(cat <&3)
exec 3<&-
grep -q "^deepnet_workers{.*state=\"ready\".*} 1" <<<"$page" ||
  fail "/metrics: $(grep '^deepnet_workers' <<<"$page")"
say "coordinator ($port) and worker ($worker_port) SERVING to deepnetctl health; worker READY;" \
  "/metrics on $metrics"
