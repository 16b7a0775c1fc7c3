#!/usr/bin/env bash
# Finds why GpuTest cases die with SIGSEGV (docs/GPU.md "Checkpoints on the GPU"): one run that
# tells the candidates apart, each variant in its own process, everything under $OUT/segv/.
#   V1 handler      the four crashing tests one by one under scripts/segv_report.c (library +
#                   offset of every frame, resolved with addr2line when the machine has it)
#   V2 protobuf     the checkpoint test with the machine's libprotobuf preloaded ahead of
#                   everything (as deepnet_bench_gpu links it; that benchmark never crashed)
#   V3 malloc       the checkpoint test with the trainer's malloc settings (train/runtime_threads.cc:
#                   mmap threshold 32 MiB, trim threshold 1 GiB, through GLIBC_TUNABLES)
#   V4 bindings     LD_DEBUG=bindings of the checkpoint test: which library each protobuf,
#                   nlohmann, OpenSSL and abseil symbol bound to, counted per (from, to) pair
#   V5 symbols      nm -D: symbols that the test binary's libraries define more than once
# A summary line per variant goes to $OUT/segv/summary.txt (crashed or not, the top frame).
#
#   bash scripts/gpu_segv_probe.sh BUILD_DIR       # OUT from the environment (gpu_check.sh)
# Without a GPU the tests skip and every variant reports "no crash": that is the dry run.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${1:-build}
OUT=${OUT:-$PWD/.cache/gpu-check-out}
DIR=$OUT/segv
mkdir -p "$DIR"
SUMMARY=$DIR/summary.txt
: >"$SUMMARY"
CAP=${SEGV_PROBE_TEST_S:-120}  # seconds per test run
say() { echo "$*" | tee -a "$SUMMARY"; }

TEST_BIN=$(find "$BUILD_DIR" -name deepnet_gpu_test -type f -perm -u+x -print -quit 2>/dev/null)
if [ -z "$TEST_BIN" ]; then
  say "segv-probe: no deepnet_gpu_test under $BUILD_DIR"
  exit 1
fi
HANDLER=$DIR/segv_report.so
if ! cc -shared -fPIC -O1 -o "$HANDLER" scripts/segv_report.c 2>"$DIR/handler_build.log"; then
  say "segv-probe: the handler did not build (handler_build.log); variants run without it"
  HANDLER=""
fi
CHECKPOINT_TEST=GpuTest.CheckpointRoundTripsCudaTensors
CRASHING=(GpuTest.CheckpointRoundTripsCudaTensors GpuTest.ResumeOnGpuIsBitIdentical
          GpuTest.Bf16TrainingStepsTrackFp32 GpuTest.SdpaTrainingStepsMatchTheReferenceAttention)

# run NAME FILTER [ENV=VALUE ...]: the test binary with FILTER in its own process; the log is
# $DIR/NAME.log; prints the verdict.
run() {
  local name=$1 filter=$2 rc verdict top
  shift 2
  env DEEPNET_SEGV_REPORT=1 "$@" timeout "$CAP" "$TEST_BIN" --gtest_filter="$filter" \
      >"$DIR/$name.log" 2>&1
  rc=$?
  if grep -q '\[  SKIPPED \]' "$DIR/$name.log" && ((rc == 0)); then
    verdict="no crash (skipped: no GPU)"
  elif ((rc == 0)); then
    verdict="passed"
  elif ((rc == 124)); then
    verdict="timed out after ${CAP} s"
  elif ((rc > 128)); then
    verdict="died of signal $((rc - 128))"
  else
    verdict="failed (rc $rc)"
  fi
  top=$(grep -m1 -E '^\[segv-report\] #0 ' "$DIR/$name.log" | sed 's/^\[segv-report\] //')
  say "$(printf '%-34s %-58s %s' "$name" "$filter" "$verdict${top:+; top frame $top}")"
}

# Resolves the report's library+offset frames with addr2line (binutils), when present.
resolve() {
  local log=$1
  command -v addr2line >/dev/null || return 0
  grep -E '^\[segv-report\] #[0-9]+ /' "$log" | head -n 24 | while read -r _ idx where _; do
    lib=${where%+0x*}
    off=0x${where##*+0x}
    fn=$(addr2line -f -C -e "$lib" "$off" 2>/dev/null | head -1)
    echo "$idx $(basename "$lib") $off ${fn:-?}"
  done >"${log%.log}.frames.txt"
}

say "segv-probe: $TEST_BIN; handler: ${HANDLER:-none}"

# V1: each crashing test alone under the handler.
for t in "${CRASHING[@]}"; do
  run "v1-handler-${t#GpuTest.}" "$t" ${HANDLER:+LD_PRELOAD=$HANDLER}
  resolve "$DIR/v1-handler-${t#GpuTest.}.log"
done

# V2: the machine's libprotobuf first (what the test links, from its own ldd).
PROTOBUF=$(ldd "$TEST_BIN" 2>/dev/null | awk '/libprotobuf\.so/ {print $3; exit}')
if [ -n "$PROTOBUF" ]; then
  run v2-protobuf-first "$CHECKPOINT_TEST" LD_PRELOAD="$PROTOBUF${HANDLER:+ $HANDLER}"
else
  say "v2-protobuf-first: the test binary does not load libprotobuf (ldd); skipped"
fi

# V3: the trainer's malloc settings.
run v3-trainer-malloc "$CHECKPOINT_TEST" \
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824 \
  ${HANDLER:+LD_PRELOAD=$HANDLER}

# V4: symbol bindings of the checkpoint test (no handler: nothing between the libraries).
rm -f "$DIR"/bindings.*
run v4-bindings "$CHECKPOINT_TEST" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$DIR/bindings"
cat "$DIR"/bindings.* 2>/dev/null |
  grep -E "normal symbol \`(_ZN6google8protobuf|_ZN8nlohmann|_ZN4absl|SSL_|EVP_|SHA256|OPENSSL_)" |
  sed -E 's/^[[:space:]]*[0-9]+:[[:space:]]*binding file ([^ ]+) \[[0-9]+\] to ([^ ]+) \[[0-9]+\]: .*/\1 -> \2/' |
  awk '{n = split($1, a, "/"); m = split($3, b, "/"); print a[n] " -> " b[m]}' |
  sort | uniq -c | sort -rn >"$DIR/bindings_summary.txt"
rm -f "$DIR"/bindings.*
say "v4-bindings: $(wc -l <"$DIR/bindings_summary.txt") (from, to) library pairs for protobuf/nlohmann/abseil/OpenSSL symbols (bindings_summary.txt)"

# V5: symbols defined by more than one of the libraries the test binary loads.
: >"$DIR/duplicate_symbols.txt"
ldd "$TEST_BIN" 2>/dev/null | awk '$3 ~ /^\// {print $3}' | sort -u >"$DIR/libraries.txt"
while read -r lib; do
  nm -D --defined-only "$lib" 2>/dev/null | awk -v l="$(basename "$lib")" '$2 ~ /^[TWDBVR]$/ {print $3, l}'
done <"$DIR/libraries.txt" |
  grep -E '^(_ZN6google8protobuf|_ZN8nlohmann|_ZN4absl|SSL_|EVP_|SHA256|_ZN2at|_ZN3c10)' |
  sort | awk '{libs[$1] = libs[$1] " " $2; n[$1]++} END {for (s in n) if (n[s] > 1) print n[s], s, libs[s]}' |
  sort -rn >"$DIR/duplicate_symbols.txt"
say "v5-symbols: $(wc -l <"$DIR/duplicate_symbols.txt") symbols defined by more than one loaded library; by pair:"
awk '{$1=""; $2=""; print}' "$DIR/duplicate_symbols.txt" | sort | uniq -c | sort -rn | head -n 8 | tee -a "$SUMMARY"
exit 0
