#!/usr/bin/env bash
# Builds the job-spec fuzzer (clang, ASan + UBSan, its own build dir) and runs it for SECONDS
# (default 300) on the committed corpus plus examples/*.yaml. New crashers are copied to
# tests/coordinator/spec_crashers/, which deepnet_coordinator_test replays on every run (SpecCorpusTest).
# Usage: bash bench/fuzz_job_spec.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
seconds=${1:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build-fuzz}
work=$(mktemp -d /tmp/job-spec-fuzz.XXXXXX)
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DDEEPNET_BUILD_FUZZERS=ON \
        -DDEEPNET_BUILD_TESTS=OFF -DDEEPNET_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build" --target job_spec_fuzz -j2
mkdir -p "$work/corpus" "$work/seeds" "$work/artifacts"
cp "$root"/examples/*.yaml "$work/seeds/"
cp "$root"/tests/coordinator/spec_corpus/* "$work/seeds/" 2>/dev/null || true
cp "$root"/tests/coordinator/spec_crashers/* "$work/seeds/" 2>/dev/null || true
set +e
"$build/tests/fuzz/job_spec_fuzz" "$work/corpus" "$work/seeds" -max_len=8192 \
  -dict="$root/tests/fuzz/job_spec_fuzz.dict" -timeout=10 -rss_limit_mb=2048 \
  -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  2>&1 | tee "$work/fuzz.log" | grep -E "^#[0-9]+[[:space:]]+(DONE|pulse|INITED)|ERROR|SUMMARY|stat::"
status=${PIPESTATUS[0]}
set -e
found=$(ls "$work/artifacts" | wc -l)
if [[ $found -gt 0 ]]; then
  mkdir -p "$root/tests/coordinator/spec_crashers"
  cp "$work"/artifacts/* "$root/tests/coordinator/spec_crashers/"
  echo "$found crasher(s) copied to tests/coordinator/spec_crashers/ (log: $work/fuzz.log)"
fi
echo "fuzzer exit status $status; corpus $(ls "$work/corpus" | wc -l) inputs in $work/corpus"
exit "$status"
