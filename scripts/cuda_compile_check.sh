#!/usr/bin/env bash
# The CUDA compile check (docs/OPERATIONS.md, "LibTorch versions"): compiles, without linking,
# every translation unit of every target that reaches LibTorch (libraries, programs, tests,
# benchmarks, any .cu file) against LibTorch 2.x CUDA headers (scripts/fetch_torch_cuda_headers.sh)
# and the CUDA toolkit, with the CUDA and NCCL code paths on (DEEPNET_HAVE_CUDA,
# DEEPNET_HAVE_NCCL). scripts/test.sh runs it, so CI fails when a change breaks the CUDA build
# or the LibTorch 2.x API. It then proves from the compilers' dependency lists that
#   - no header of the system's LibTorch 1.13 (/usr/include/{torch,ATen,c10,...}) was used in
#     place of a 2.x one,
#   - no translation unit of a target that links LibTorch includes protobuf/gRPC or spdlog
#     headers (a PyTorch 2.x package ships protobuf and fmt headers in its include folder, which
#     such a translation unit searches first: keep generated code, gRPC and spdlog in torch-free
#     targets, as deepnet_comm_rendezvous and deepnet_storage do),
#   - every source file that includes LibTorch headers was compiled.
#
#   bash scripts/cuda_compile_check.sh       # tree: build-cuda-check/ (CUDA_CHECK_BUILD_DIR)
#
# Object files are cached by ccache, so an unchanged tree takes seconds. Developers without the
# headers or the toolkit may skip it with DEEPNET_SKIP_CUDA_CHECK=1 (scripts/test.sh); CI never
# sets it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
INCLUDE=${DEEPNET_TORCH_CUDA_INCLUDE:-$ROOT/.cache/torch-cuda/root/usr/include}
BUILD=${CUDA_CHECK_BUILD_DIR:-build-cuda-check}
CUDA_ROOT=${CUDAToolkit_ROOT:-/usr/local/cuda}

fail() {
  echo "[cuda-check] FAILED: $*" >&2
  exit 1
}

[ -f "$INCLUDE/torch/csrc/api/include/torch/version.h" ] ||
  fail "no LibTorch 2.x CUDA headers in $INCLUDE. Run: bash scripts/fetch_torch_cuda_headers.sh" \
    "(scripts/setup.sh does), or set DEEPNET_TORCH_CUDA_INCLUDE to such a folder."
[ -x "$CUDA_ROOT/bin/nvcc" ] ||
  fail "no CUDA toolkit at $CUDA_ROOT (nvcc, cuda_runtime.h, nccl.h). Install it there or set" \
    "CUDAToolkit_ROOT."

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}
start=$(date +%s)

# Configure once (and again when pointed at other headers); ninja re-runs CMake on edits.
configured=$(sed -n 's/^DEEPNET_TORCH_HEADERS_ONLY:PATH=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
if [ ! -f "$BUILD/build.ninja" ] || [ "$configured" != "$INCLUDE" ]; then
  echo "[cuda-check] configuring $BUILD against $INCLUDE"
  mkdir -p "$BUILD"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
    -DCMAKE_CUDA_FLAGS_DEBUG=-O0 -DCUDAToolkit_ROOT="$CUDA_ROOT" \
    -DDEEPNET_TORCH_HEADERS_ONLY="$INCLUDE" >"$BUILD/configure.log" 2>&1 || {
    tail -n 40 "$BUILD/configure.log" >&2
    fail "configuring the compile-only tree failed (log: $BUILD/configure.log)"
  }
fi

version=$(awk '/#define TORCH_VERSION_(MAJOR|MINOR|PATCH) /{v = v (v == "" ? "" : ".") $3} END {print v}' \
  "$INCLUDE/torch/csrc/api/include/torch/version.h")
echo "[cuda-check] compiling against LibTorch $version CUDA headers and $("$CUDA_ROOT/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/CUDA \1/p')"
if ! cmake --build "$BUILD" --target deepnet_cuda_check -- -k 0; then
  fail "a translation unit does not compile against LibTorch $version with CUDA (errors above;" \
    "FAILED lines name the files). Code must compile against LibTorch 1.13 (CPU) and 2.x" \
    "(CUDA): guard API differences on TORCH_VERSION_MAJOR/TORCH_VERSION_MINOR" \
    "(<torch/version.h>) and CUDA-only code on DEEPNET_HAVE_CUDA (NCCL: DEEPNET_HAVE_NCCL)." \
    "Rerun with: bash scripts/cuda_compile_check.sh"
fi

# The dependency lists of the checked objects (the first entry of each is its source file).
# Precompiled headers (.gch) are queried too: the headers inside them count.
build_logical=$(cd "$BUILD" && pwd -L)
build_physical=$(cd "$BUILD" && pwd -P)
objects=()
pchs=()
while IFS= read -r object; do
  object=${object#"$build_logical/"}
  object=${object#"$build_physical/"}
  case "$object" in
    *.o) objects+=("$object") ;;
    *.gch) pchs+=("$object") ;;
  esac
done <"$BUILD/cuda_check/objects.txt"
deps=$BUILD/cuda_check/deps.txt
ninja -C "$BUILD" -t deps "${objects[@]}" "${pchs[@]}" >"$deps"

# The top-level names of the 2.x include folder (torch, ATen, c10, caffe2, ...): any of them
# under /usr/include is the system's LibTorch 1.13.
system_torch=$(cd "$INCLUDE" && ls | sed 's/[.]/[.]/g' | paste -sd'|')
report=$BUILD/cuda_check/report.txt
awk -v sys="^/usr/include/(${system_torch})(/|$)" '
  function flush() {
    if (object == "") return
    if (!found) print "missing " object
    if (source != "") print "compiled " source
    if (sys_hit != "") print "system-torch " source " " sys_hit
    if (proto != "") print "torch+protobuf " source " " proto
  }
  /^[^ ].*: #deps/ { flush(); object = $1; sub(/:$/, "", object); found = 1; source = ""
                     sys_hit = ""; proto = ""; next }
  /deps not found/ { flush(); object = $1; sub(/:$/, "", object); found = 0; source = ""
                     sys_hit = ""; proto = ""; next }
  /^    / {
    dep = $1
    if (source == "") source = dep
    # A unity object (cmake/torch_headers_only.cmake) compiled every source file it includes.
    if (dep ~ /\.(cc|cpp|cu)$/) print "compiled " dep
    if (sys_hit == "" && dep ~ sys) sys_hit = dep
    if (proto == "" && (dep ~ /\/google\/protobuf\// || dep ~ /\.pb\.h$/)) proto = dep
    if (proto == "" && dep ~ /\/spdlog\//) proto = dep
  }
  END { flush() }' "$deps" >"$report"

problems=0
if grep -q '^missing ' "$report"; then
  echo "[cuda-check] no dependency list for: $(grep '^missing ' "$report" | cut -d' ' -f2 | paste -sd' ')" >&2
  problems=1
fi
if grep -q '^system-torch ' "$report"; then
  echo "[cuda-check] these translation units used the system's LibTorch 1.13 headers instead of" \
    "LibTorch $version's (a header missing from $INCLUDE, or an include path ahead of it):" >&2
  grep '^system-torch ' "$report" | cut -d' ' -f2- | sed 's/^/  /' >&2
  problems=1
fi
if grep -q '^torch+protobuf ' "$report"; then
  echo "[cuda-check] these translation units of targets that link LibTorch include" \
    "protobuf/gRPC or spdlog headers; a PyTorch 2.x package ships its own protobuf and fmt" \
    "headers in the include folder they search first (spdlog then fails against PyTorch's fmt)." \
    "Move that code into a LibTorch-free target behind a plain interface (as" \
    "comm/rendezvous_client.h, comm/comm_log.h, storage/storage_log.h):" >&2
  grep '^torch+protobuf ' "$report" | cut -d' ' -f2- | sed 's/^/  /' >&2
  problems=1
fi
# Every tracked source that includes LibTorch must have been compiled above.
compiled=$BUILD/cuda_check/compiled.txt
grep '^compiled ' "$report" | cut -d' ' -f2 | while IFS= read -r source; do
  case "$source" in
    /*) realpath -m --relative-to="$ROOT" "$source" ;;
    *) realpath -m --relative-to="$ROOT" "$BUILD/$source" ;;
  esac
done | sed 's|^\./||' | LC_ALL=C sort -u >"$compiled"
uncovered=$(git ls-files --cached --others --exclude-standard '*.cc' '*.cpp' '*.cu' |
  xargs -r grep -lE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(torch|ATen|c10|caffe2)/' |
  LC_ALL=C sort | LC_ALL=C comm -23 - "$compiled" || true)
if [ -n "$uncovered" ]; then
  echo "[cuda-check] these sources include LibTorch but no target of the check compiles them" \
    "(add them to a CMake target that links LibTorch):" >&2
  echo "$uncovered" | sed 's/^/  /' >&2
  problems=1
fi
((problems == 0)) || fail "see above (dependency lists in $deps)"

count=${#objects[@]}
cu=$(printf '%s\n' "${objects[@]}" | grep -c '\.cu\.o$' || true)
echo "[cuda-check] OK: $count translation units ($cu .cu) compile against LibTorch $version +" \
  "CUDA; no LibTorch 1.13 header used; no protobuf header next to LibTorch ($(($(date +%s) - start)) s)"
