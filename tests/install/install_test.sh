#!/usr/bin/env bash
# The install layout (ctest -L install; cmake/install.cmake): `cmake --install BUILD --prefix P`
# into a temporary prefix, then everything run from P alone:
#   1. exactly the four programs in P/bin, the SentencePiece module, wait_for_workers.sh and the
#      shared files; no test, benchmark or test tool; every program resolves its libraries;
#   2. scripts/check_installed.sh, the checks the image smoke test (scripts/image_smoke.sh) runs
#      inside an image too: --version (the project's version) and --help; `deepnet train` on an
#      installed example (--validate-config, then two steps to a checkpoint); the service from
#      P/bin (a coordinator, a worker that finds its trainer beside itself,
#      P/libexec/deepnet/wait_for_workers.sh finding P/bin/deepnetctl on its own, both daemons
#      SERVING to `deepnetctl health`, /metrics counting the ready worker);
#   3. `deepnet data prepare` loads the installed SentencePiece module, not the build tree's;
#   4. the Kubernetes manifests name the images deepnet and deepnet-cuda tagged with the
#      project's version (scripts/image_build.sh writes them).
#
#   tests/install/install_test.sh CMAKE BUILD_DIR WORK_DIR VERSION
set -euo pipefail
cmake=$1 build_dir=$(cd "$2" && pwd) work=$3 version=$4
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rm -rf "$work"; mkdir -p "$work"
prefix=$work/prefix
fail() { echo "install_test: FAILED: $*" >&2; exit 1; }

"$cmake" --install "$build_dir" --prefix "$prefix" > "$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install"; }

# 1. What is installed, and every program's libraries.
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

for program in $programs; do
  missing=$(ldd "$prefix/bin/$program" | grep 'not found' || true)
  [ -z "$missing" ] || fail "$program: $missing"
done

# 2. The checks shared with the image smoke test.
bash "$repo/scripts/check_installed.sh" "$prefix" "$version" "$work" 1 ||
  fail "scripts/check_installed.sh (above)"

# 3. The installed SentencePiece module, from a folder outside the checkout.
cd "$work"
mkdir -p corpus
for split in train valid test; do
  for i in $(seq 1 100); do printf 'open file %d\tdatei %d oeffnen\n' "$i" "$i"; done \
    > "corpus/$split.de.tsv"
done
LD_DEBUG=files "$prefix/bin/deepnet" data prepare --corpus corpus --out shards --vocab-size 40 \
  --threads 1 > prepare.log 2>&1 || { grep -v '^ *[0-9]*:' prepare.log >&2; fail "data prepare"; }
grep -q "file=$prefix/bin/../lib/deepnet/libdeepnet_spm.so .*dynamically loaded" prepare.log ||
  fail "deepnet did not load P/lib/deepnet/libdeepnet_spm.so: $(grep libdeepnet_spm prepare.log)"

# 4. Image tags follow the version.
kustomization=$repo/deploy/kubernetes/kustomization.yaml
tags=$(sed -n 's/^ *newTag: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$kustomization" | sort -u)
[ "$tags" = "$version" ] || fail "$kustomization tags '$tags', the project is $version"
images=$(sed -n 's/^ *- *image: *\(deepnet[^ ]*\).*$/\1/p;s/^ *image: *\(deepnet[^ ]*\).*$/\1/p' \
  "$repo"/deploy/kubernetes/*.yaml | sort -u | tr '\n' ' ')
[ "$images" = "deepnet-cuda:$version deepnet:$version " ] ||
  fail "deploy/kubernetes names our images '$images', expected deepnet[-cuda]:$version"
echo "install_test: passed"
