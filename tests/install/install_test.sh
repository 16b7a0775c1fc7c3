#!/usr/bin/env bash
# The install layout (ctest -L install; cmake/install.cmake): `cmake --install BUILD --prefix P`
# into a temporary prefix, then everything run from P alone:
#   1. exactly the four programs in P/bin, the SentencePiece module, wait_for_workers.sh and the
#      shared files; no test, benchmark or test tool;
#   2. every program resolves its libraries and answers --version (the project's version) and
#      --help;
#   3. `deepnet train` on an installed example: --validate-config, then two steps to a checkpoint;
#      `deepnet data prepare` loads the installed SentencePiece module, not the build tree's;
#   4. the service from P/bin: a coordinator, a worker that finds its trainer beside itself,
#      P/libexec/deepnet/wait_for_workers.sh finding P/bin/deepnetctl on its own, and both
#      daemons SERVING to `deepnetctl health`;
#   5. the Kubernetes manifests name the images deepnet and deepnet-cuda tagged with the
#      project's version (scripts/image_build.sh writes them).
#
#   tests/install/install_test.sh CMAKE BUILD_DIR WORK_DIR VERSION
set -euo pipefail
cmake=$1 build_dir=$(cd "$2" && pwd) work=$3 version=$4
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rm -rf "$work"; mkdir -p "$work"
prefix=$work/prefix
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
fail() { echo "install_test: FAILED: $*" >&2; exit 1; }

"$cmake" --install "$build_dir" --prefix "$prefix" > "$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install"; }

# 1. What is installed.
programs="deepnet deepnet-coordinator deepnet-worker deepnetctl"
[ "$(ls "$prefix/bin" | tr '\n' ' ')" = "$programs " ] ||
  fail "P/bin holds '$(ls "$prefix/bin" | tr '\n' ' ')', expected '$programs '"
for file in lib/deepnet/libdeepnet_spm.so libexec/deepnet/wait_for_workers.sh \
  share/deepnet/examples/synthetic_small.yaml share/deepnet/examples/experiments/update-norm.yaml \
  share/deepnet/jobs/cpu-small.yaml share/deepnet/slurm/deepnet-service.sbatch \
  share/deepnet/slurm/deepnet-standalone.sbatch share/deepnet/prometheus/alerts.yml \
  share/deepnet/grafana/dashboards/deepnet.json; do
  [ -f "$prefix/$file" ] || fail "P/$file is missing"
done
stray=$(find "$prefix" -type f \( -name '*_test' -o -name '*bench*' -o -name 'deploy_lint' \
  -o -name '*.a' -o -name '*.h' \))
[ -z "$stray" ] || fail "installed test or build files: $stray"

# 2. Libraries, --version, --help.
for program in $programs; do
  missing=$(ldd "$prefix/bin/$program" | grep 'not found' || true)
  [ -z "$missing" ] || fail "$program: $missing"
  out=$("$prefix/bin/$program" --version) || fail "$program --version exited $?"
  [[ $out == "$version"* ]] || fail "$program --version printed '$out', expected $version"
  "$prefix/bin/$program" --help > "$work/$program.help" || fail "$program --help exited $?"
done

# 3. The trainer on an installed example, from a folder outside the checkout.
cd "$work"
example=$prefix/share/deepnet/examples/synthetic_small.yaml
"$prefix/bin/deepnet" train --config "$example" --validate-config > validate.out ||
  fail "--validate-config on $example"
"$prefix/bin/deepnet" train --config "$example" --set train.max_steps=2 \
  --set checkpoint.dir="$work/checkpoints" > train.log 2>&1 || { tail train.log >&2; fail "train"; }
ls -d "$work"/checkpoints/step_000000002 > /dev/null || fail "no checkpoint at step 2"
mkdir -p corpus
for split in train valid test; do
  for i in $(seq 1 100); do printf 'open file %d\tdatei %d oeffnen\n' "$i" "$i"; done \
    > "corpus/$split.de.tsv"
done
LD_DEBUG=files "$prefix/bin/deepnet" data prepare --corpus corpus --out shards --vocab-size 40 \
  --threads 1 > prepare.log 2>&1 || { grep -v '^ *[0-9]*:' prepare.log >&2; fail "data prepare"; }
grep -q "file=$prefix/bin/../lib/deepnet/libdeepnet_spm.so .*dynamically loaded" prepare.log ||
  fail "deepnet did not load P/lib/deepnet/libdeepnet_spm.so: $(grep libdeepnet_spm prepare.log)"

# 4. The service from P/bin.
user_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
worker_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s tester user\n%s workers worker\n' "$user_token" "$worker_token" > tokens
printf '%s\n' "$worker_token" > worker.token
"$prefix/bin/deepnet-coordinator" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --db coordinator.db --tokens-file tokens --port-file ports > coordinator.log 2>&1 &
pids+=($!)
for _ in $(seq 300); do [ -f ports ] && break; sleep 0.1; done
[ -f ports ] || { cat coordinator.log >&2; fail "the installed coordinator did not start"; }
port=$(sed -n 's/^grpc=//p' ports)
export DEEPNET_COORDINATOR="127.0.0.1:$port" DEEPNET_TOKEN="$user_token"
unset CTL
"$prefix/bin/deepnet-worker" --coordinator "127.0.0.1:$port" --name installed --slots 1 \
  --work-dir worker --token-file worker.token --listen 127.0.0.1:0 > worker.log 2>&1 &
pids+=($!)
PATH=/usr/bin:/bin bash "$prefix/libexec/deepnet/wait_for_workers.sh" 1 1 60 "${pids[1]}" \
  > wait.out 2>&1 || fail "wait_for_workers: $(cat wait.out; tail -n 5 worker.log)"
# Both daemons answer the gRPC health check kubelet's probes make.
worker_port=$(sed -n 's/.*health on port \([0-9]*\).*/\1/p' worker.log)
for address in "127.0.0.1:$port" "127.0.0.1:$worker_port"; do
  [ "$(DEEPNET_TOKEN= "$prefix/bin/deepnetctl" health "$address")" = SERVING ] ||
    fail "deepnetctl health $address"
done

# 5. Image tags follow the version.
kustomization=$repo/deploy/kubernetes/kustomization.yaml
tags=$(sed -n 's/^ *newTag: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$kustomization" | sort -u)
[ "$tags" = "$version" ] || fail "$kustomization tags '$tags', the project is $version"
images=$(sed -n 's/^ *- *image: *\(deepnet[^ ]*\).*$/\1/p;s/^ *image: *\(deepnet[^ ]*\).*$/\1/p' \
  "$repo"/deploy/kubernetes/*.yaml | sort -u | tr '\n' ' ')
[ "$images" = "deepnet-cuda:$version deepnet:$version " ] ||
  fail "deploy/kubernetes names our images '$images', expected deepnet[-cuda]:$version"
echo "install_test: passed"
