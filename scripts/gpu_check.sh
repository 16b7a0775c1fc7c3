#!/usr/bin/env bash
# The GPU kit's one command (docs/PERFORMANCE.md "GPU kit"): on the GPU test machine (PyTorch 2.x
# with CUDA in its Python package, nvcc, CMake, ninja, no network) it
#   1. records the machine (GPU, driver, PyTorch, compilers, glibc),
#   2. unpacks from .cache/gpu-bundle/ (scripts/gpu_bundle.sh) the package groups the machine
#      lacks, into a private prefix (never into /),
#   3. configures and builds the trainer side (deepnet, the GPU benchmark, the test binaries
#      labelled gpu or torch2) against that PyTorch with DEEPNET_WITH_CUDA=ON for sm_90,
#   4. runs `ctest -L gpu` and `ctest -L torch2`, then scripts/gpu_segv_probe.sh (the GpuTest
#      SIGSEGV's candidate causes, one process each),
#   5. runs the GPU benchmark (bench/gpu_throughput.cc; one profiled step per configuration,
#      Chrome traces in $OUT/profile) and `deepnet plan` for the same configs,
#   6. prints one summary.
# Every stage has a time limit inside a total budget (KIT_BUDGET_S, default 450 s) and writes its
# result to $OUT as soon as it ends, so a run cut short still reports; a failed stage prints the
# end of its log and what is missing.
#
#   bash scripts/gpu_check.sh                 # on the GPU machine (OUT set by the device tool)
#   bash scripts/gpu_check.sh --dry-run       # here: Debian's LibTorch (CPU), same stages
#   options: --dry-run (also chosen when no GPU is visible), --force-bundle (unpack and use every
#   bundled group even where the machine has it), --build-dir DIR, --prefix DIR, --jobs N,
#   --targets "t1 t2" (build only these), --no-tests, --no-bench
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
T0=$(date +%s)

DRY_RUN=auto FORCE_BUNDLE=0 JOBS=$(nproc) TARGETS="" RUN_TESTS=1 RUN_BENCH=1
BUILD_DIR="" PREFIX=""
while (($#)); do
  case $1 in
    --dry-run) DRY_RUN=1 ;;
    --force-bundle) FORCE_BUNDLE=1 ;;
    --build-dir) BUILD_DIR=$2; shift ;;
    --prefix) PREFIX=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --targets) TARGETS=$2; shift ;;
    --no-tests) RUN_TESTS=0 ;;
    --no-bench) RUN_BENCH=0 ;;
    *) echo "gpu_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

OUT=${OUT:-$ROOT/.cache/gpu-check-out}
mkdir -p "$OUT"
BUNDLE=${BUNDLE_DIR:-$ROOT/.cache/gpu-bundle}
BUDGET=${KIT_BUDGET_S:-450}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"

now() { echo $(($(date +%s) - T0)); }
left() { echo $((BUDGET - $(now))); }
# note STAGE STATUS TEXT: one summary line, written at once.
note() { printf '%-12s %-6s %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY"; }
# fail_hint LOG: the end of a failed stage's log and the lines that name what is missing.
fail_hint() {
  echo "----- last lines of $(basename "$1") -----"
  tail -n 25 "$1"
  echo "----- missing pieces named in it -----"
  grep -A3 "CMake Error" "$1" | head -n 20
  grep -E "fatal error: .*No such file|Could NOT find|not found|undefined reference|cannot find -l|error while loading shared libraries|FAILED:|error:" "$1" \
    | sort | uniq -c | sort -rn | head -n 12
  echo "-----"
}
# limit SECONDS CAP: a stage's time limit, the smaller of CAP and what the budget leaves after
# RESERVE seconds for the stages after it.
limit() {
  local reserve=$1 cap=$2 l
  l=$(($(left) - reserve))
  ((l > cap)) && l=$cap
  ((l < 10)) && l=10
  echo $l
}

# ---- 1. machine ---------------------------------------------------------------------------
ENV_LOG=$OUT/env.txt
PY=$(command -v python3 || true)
TORCH_PREFIX="" TORCH_VERSION="" TORCH_CUDA="" TORCH_ABI=""
if [ -n "$PY" ]; then
  read -r TORCH_VERSION TORCH_CUDA TORCH_ABI TORCH_PREFIX < <("$PY" - 2>/dev/null <<'EOF'
import torch
print(torch.__version__, int(torch.cuda.is_available()), int(torch.compiled_with_cxx11_abi()),
      torch.utils.cmake_prefix_path)
EOF
  ) || true
fi
GPU_NAME=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
if [ "$DRY_RUN" = auto ]; then
  if [ -n "$GPU_NAME" ] && [ "$TORCH_CUDA" = 1 ]; then DRY_RUN=0; else DRY_RUN=1; fi
fi
{
  echo "date: $(date -u +%FT%TZ)  host: $(hostname)  nproc: $(nproc)"
  echo "os: $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}")  glibc: $(ldd --version 2>/dev/null | head -1 | awk '{print $NF}')"
  echo "gpu: ${GPU_NAME:-none}"
  echo "python: ${PY:-none}  torch: ${TORCH_VERSION:-none}  cuda available: ${TORCH_CUDA:-?}  cxx11 abi: ${TORCH_ABI:-?}"
  echo "torch cmake prefix: ${TORCH_PREFIX:-none}"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)  cmake: $(cmake --version 2>/dev/null | head -1)  ninja: $(ninja --version 2>/dev/null)"
  echo "c++: $(c++ --version 2>/dev/null | head -1)  ccache: $(command -v ccache || echo none)"
  echo "bundle: $(cat "$BUNDLE/origin.txt" 2>/dev/null | tr '\n' ' ')"
  if [ -n "$TORCH_PREFIX" ]; then
    tinc=$(dirname "$(dirname "$(dirname "$TORCH_PREFIX")")")/include
    [ -d "$TORCH_PREFIX/../../include" ] && tinc=$(cd "$TORCH_PREFIX/../../include" && pwd)
    echo "torch include: $tinc (gloo headers: $([ -f "$tinc/gloo/algorithm.h" ] && echo yes || echo no), protobuf headers: $([ -d "$tinc/google/protobuf" ] && echo yes || echo no))"
    tlib=$(cd "$TORCH_PREFIX/../../lib" 2>/dev/null && pwd)
    if [ -n "$tlib" ] && [ -f "$tlib/libtorch_cpu.so" ]; then
      echo "libtorch_cpu exports protobuf symbols: $(nm -D --defined-only "$tlib/libtorch_cpu.so" 2>/dev/null | grep -c '_ZN6google8protobuf' || true)"
    fi
  fi
} >"$ENV_LOG" 2>&1
cat "$ENV_LOG"
MODE=gpu; ((DRY_RUN)) && MODE="dry-run (no GPU: CPU LibTorch, GPU tests skip)"
note machine ok "$MODE; ${GPU_NAME:-no GPU}; torch ${TORCH_VERSION:-Debian LibTorch}"
if ((!DRY_RUN)) && [ "$TORCH_ABI" = 0 ]; then
  note machine warn "PyTorch uses the pre-C++11 std::string ABI: bundled C++ libraries will not link with it"
fi

# ---- 2. dependencies ----------------------------------------------------------------------
PREFIX=${PREFIX:-$( ((DRY_RUN)) && echo "$ROOT/.cache/gpu-prefix" || echo /tmp/deepnet-gpu-prefix)}
DEPS_LOG=$OUT/env.txt
ARCH_LIB=usr/lib/x86_64-linux-gnu
# present GROUP: the machine already has what the build takes from this group.
# unpack_deb DEB DIR: dpkg-deb where the machine has it, else ar + tar (binutils).
unpack_deb() {
  if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$1" "$2"; return; fi
  local member
  member=$(ar t "$1" | grep '^data\.tar') || return 1
  case $member in
    *.xz) ar p "$1" "$member" | tar -xJ -C "$2" ;;
    *.zst) ar p "$1" "$member" | zstd -dc | tar -x -C "$2" ;;
    *) ar p "$1" "$member" | tar -xz -C "$2" ;;
  esac
}
have_hdr() { for d in /usr/include /usr/local/include; do [ -e "$d/$1" ] && return 0; done; return 1; }
have_pc() { pkg-config --exists "$1" 2>/dev/null; }
have_cmake() { compgen -G "/usr/lib/x86_64-linux-gnu/cmake/$1" >/dev/null || compgen -G "/usr/lib/cmake/$1" >/dev/null || compgen -G "/usr/share/cmake/$1" >/dev/null || compgen -G "/usr/local/lib/cmake/$1" >/dev/null; }
present() {
  case $1 in
    pkgconf) command -v pkg-config >/dev/null ;;
    grpc) have_pc grpc++ && command -v protoc >/dev/null && command -v grpc_cpp_plugin >/dev/null && have_cmake absl ;;
    yaml) have_cmake yaml-cpp ;;
    json) have_cmake nlohmann_json ;;
    spdlog) have_cmake spdlog ;;
    cli11) have_cmake CLI11 ;;
    gtest) have_cmake GTest ;;
    ssl) have_hdr openssl/sha.h ;;
    sentencepiece) have_pc sentencepiece ;;
    mpi) command -v mpicxx >/dev/null && command -v mpirun >/dev/null ;;
    sqlite) have_hdr sqlite3.h ;;
    prometheus) have_cmake prometheus-cpp ;;
    *) return 1 ;;
  esac
}
{
  glibc=$(ldd --version 2>/dev/null | head -1 | awk '{print $NF}')
  if [ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -1)" != 2.36 ]; then
    echo "WARNING: glibc $glibc < 2.36: bookworm's libraries need 2.36; bundled groups may fail to load"
  fi
  # A prefix this script filled before (it holds .groups) starts empty: no stale group.
  [ -f "$PREFIX/.groups" ] && rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  used=() have=()
  while read -r group pkgs; do
    [ -z "$group" ] && continue
    if ((!FORCE_BUNDLE)) && present "$group"; then have+=("$group"); continue; fi
    for p in $pkgs; do
      deb=$(compgen -G "$BUNDLE/debs/${p}_*.deb" | head -1)
      if [ -z "$deb" ]; then echo "MISSING in bundle: $p (run scripts/gpu_bundle.sh here)"; continue; fi
      unpack_deb "$deb" "$PREFIX" || echo "FAILED to unpack $deb"
    done
    used+=("$group")
  done <"$BUNDLE/groups.txt"
  # Relocate: pkg-config files and absolute symlinks point into /usr; make them point here.
  find "$PREFIX" -name '*.pc' -print0 2>/dev/null | xargs -0 -r sed -i "s|=/usr|=$PREFIX/usr|g; s| /usr/| $PREFIX/usr/|g"
  find "$PREFIX" -type l -lname '/*' 2>/dev/null | while read -r l; do
    t=$(readlink "$l"); case $t in "$PREFIX"/*) ;; *) ln -sfn "$PREFIX$t" "$l" ;; esac
  done
  # Runtime libraries that system programs (cmake, the compiler, python) may load too: the
  # machine's own copy wins where it has one, so LD_LIBRARY_PATH never hands those programs an
  # older bookworm build. libcurl is only there for find_package(CURL) of prometheus-cpp's
  # config (the coordinator, not built here): without the machine's, it goes aside, off the path.
  libdir=$PREFIX/$ARCH_LIB
  mkdir -p "$PREFIX/aside"
  system_libs=$(ldconfig -p 2>/dev/null)
  for so in libuuid.so.1 libudev.so.1 libatomic.so.1 libsqlite3.so.0 libcurl.so.4; do
    compgen -G "$libdir/$so*" >/dev/null || continue
    if grep -qE "^[[:space:]]*$so \(" <<<"$system_libs"; then
      rm -f "$libdir/$so" "$libdir/$so".*
    elif [ "$so" = libcurl.so.4 ]; then
      mv "$libdir/$so"* "$PREFIX/aside/" && ln -sfn "$PREFIX/aside/$so" "$libdir/libcurl.so"
    fi
  done
  # Development links whose library is the machine's (libssl.so, libz.so, ...) or was removed
  # above: point them at the machine's copy, by exact name or by a shorter version suffix.
  find "$libdir" -maxdepth 1 -xtype l 2>/dev/null | while read -r l; do
    t=$(basename "$(readlink "$l")")
    while [ -n "$t" ]; do
      for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
        if [ -e "$d/$t" ]; then ln -sfn "$d/$t" "$l"; continue 3; fi
      done
      case $t in *.so.*) t=${t%.*} ;; *) t="" ;; esac
    done
    echo "dangling (no library for it here): $l -> $(readlink "$l")"
  done
  echo "from the machine: ${have[*]:-none}"
  echo "from the bundle (in $PREFIX): ${used[*]:-none}"
  echo "${used[*]:-}" >"$PREFIX/.groups"
} >"$OUT/deps.tmp" 2>&1
cat "$OUT/deps.tmp" | tee -a "$DEPS_LOG"
BUNDLED=$(cat "$PREFIX/.groups" 2>/dev/null)
if [ ! -f "$BUNDLE/groups.txt" ]; then
  note deps FAIL "no bundle at $BUNDLE: run scripts/gpu_bundle.sh and carry .cache/gpu-bundle"
elif grep -q "MISSING\|FAILED" "$OUT/deps.tmp"; then
  note deps FAIL "$(grep -c "MISSING\|FAILED" "$OUT/deps.tmp") package(s) missing or broken (env.txt)"
else
  note deps ok "bundled: ${BUNDLED:-none} ($(du -sh "$PREFIX" 2>/dev/null | cut -f1) unpacked)"
fi
rm -f "$OUT/deps.tmp"
export PATH="$PREFIX/usr/bin:$PATH"
export LD_LIBRARY_PATH="$PREFIX/$ARCH_LIB:$PREFIX/$ARCH_LIB/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_PATH="$PREFIX/$ARCH_LIB/pkgconfig:$PREFIX/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if [[ " $BUNDLED " == *" mpi "* ]]; then
  # Open MPI finds its wrapper data, help files and plugins below OPAL_PREFIX.
  export OPAL_PREFIX=$PREFIX/usr
  export OMPI_MCA_plm_rsh_agent=false  # Single node: never look for ssh.
  # Debian makes these names with update-alternatives at install time; dpkg -x does not.
  for n in mpirun mpiexec mpicxx mpicc; do
    [ -e "$PREFIX/usr/bin/$n" ] || ln -sfn "$n.openmpi" "$PREFIX/usr/bin/$n"
  done
fi
if [[ " $BUNDLED " == *" pkgconf "* ]]; then
  ln -sfn pkgconf "$PREFIX/usr/bin/pkg-config" 2>/dev/null || true
fi

# ---- 3. configure and build --------------------------------------------------------------
BUILD_DIR=${BUILD_DIR:-$( ((DRY_RUN)) && echo build || echo build-gpu)}
BUILD_LOG=$OUT/build.log
CMAKE_ARGS=(-S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release)
PREFIX_PATH="$PREFIX/usr"
if ((!DRY_RUN)); then
  PREFIX_PATH="$TORCH_PREFIX;$PREFIX/usr"
  nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$nvcc_path")")}
  export PATH="$CUDA_HOME/bin:$PATH"
  export CUDA_HOME CUDACXX=$CUDA_HOME/bin/nvcc TORCH_CUDA_ARCH_LIST=9.0
  # NCCL: PyTorch's pip NCCL (nvidia/nccl) has only libnccl.so.2; give CMake a folder with the
  # unversioned name (comm/CMakeLists.txt reads NCCL_ROOT).
  if ! [ -f "$CUDA_HOME/include/nccl.h" ]; then
    nccl_dir=$("$PY" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null)
    if [ -n "$nccl_dir" ] && [ -f "$nccl_dir/include/nccl.h" ]; then
      mkdir -p "$PREFIX/nccl/lib"
      ln -sfn "$nccl_dir/include" "$PREFIX/nccl/include"
      ln -sfn "$nccl_dir/lib/libnccl.so.2" "$PREFIX/nccl/lib/libnccl.so"
      export NCCL_ROOT=$PREFIX/nccl
    fi
  fi
  CMAKE_ARGS+=(-DDEEPNET_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0
               -DCUDAToolkit_ROOT="$CUDA_HOME")
fi
CMAKE_ARGS+=("-DCMAKE_PREFIX_PATH=$PREFIX_PATH")
if [[ " $BUNDLED " == *" grpc "* ]]; then
  CMAKE_ARGS+=(-DProtobuf_ROOT="$PREFIX/usr" -DProtobuf_PROTOC_EXECUTABLE="$PREFIX/usr/bin/protoc")
fi
if [[ " $BUNDLED " == *" mpi "* ]]; then
  CMAKE_ARGS+=(-DMPI_CXX_COMPILER="$PREFIX/usr/bin/mpicxx.openmpi"
               -DMPIEXEC_EXECUTABLE="$PREFIX/usr/bin/mpirun.openmpi")
fi
t=$(date +%s)
{
  echo "cmake ${CMAKE_ARGS[*]}"
  echo "PATH=$PATH"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
  echo "NCCL_ROOT=${NCCL_ROOT:-}  CUDA_HOME=${CUDA_HOME:-}  OPAL_PREFIX=${OPAL_PREFIX:-}"
} >"$BUILD_LOG"
timeout "$(limit 300 120)" cmake "${CMAKE_ARGS[@]}" >>"$BUILD_LOG" 2>&1
rc=$?
if ((rc != 0)); then
  note configure FAIL "rc $rc after $(($(date +%s) - t)) s (build.log)"
  fail_hint "$BUILD_LOG"
else
  note configure ok "$(($(date +%s) - t)) s; $(grep -E 'CUDA/NCCL code paths|NCCL backend|gloo backend' "$BUILD_LOG" | sed 's/^-- //' | tr '\n' ';')"
fi

# What to build: the trainer, the GPU benchmark and every test binary with a gpu or torch2 test
# (their gtest_discover_tests PROPERTIES, or add_test labels in CTestTestfile.cmake).
if [ -z "$TARGETS" ]; then
  TARGETS="deepnet deepnet_bench_gpu"
  for f in "$BUILD_DIR"/tests/*_include.cmake; do
    [ -f "$f" ] || continue
    if grep -qE 'TEST_PROPERTIES \[==\[[^]]*LABELS;[^]]*\b(gpu|torch2)\b' "$f"; then
      b=$(basename "$f"); TARGETS+=" ${b%%\[*}"
    fi
  done
  # The same read from tests/CMakeLists.txt: the include files' format differs between CMake
  # versions (CMake 4.4 on the GPU machine matched nothing above, so no test was built).
  TARGETS+=" $(python3 - "$ROOT/tests/CMakeLists.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
for m in re.finditer(r"gtest_discover_tests\(\s*(\w+)", text):
    depth, i = 1, m.end()
    while depth and i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    if re.search(r"LABELS\s+\"?[^)]*\b(gpu|torch2)\b", text[m.end():i]):
        print(m.group(1))
PY
)"
  # Plain add_test tests labelled gpu/torch2: the programs of this build they run.
  TARGETS+=" $(python3 scripts/ctest_label_programs.py "$BUILD_DIR" gpu torch2 2>/dev/null)"
  # Only names ninja knows: one unknown target would stop the whole build.
  known=" $(ninja -C "$BUILD_DIR" -t targets all 2>/dev/null | cut -d: -f1 | tr '\n' ' ') "
  kept=""
  for tg in $TARGETS; do
    if [[ "$known" == *" $tg "* ]]; then kept+=" $tg"; else echo "[gpu_check] no target $tg: left out"; fi
  done
  TARGETS=${kept# }
fi
t=$(date +%s)
if ((rc == 0)); then
  blimit=$(limit 150 330)
  echo "[gpu_check] building ($blimit s limit, -j$JOBS): $TARGETS"
  timeout "$blimit" cmake --build "$BUILD_DIR" -j "$JOBS" --target $TARGETS -- -k 0 >>"$BUILD_LOG" 2>&1
  brc=$?
  built=0; total=0
  for tg in $TARGETS; do
    total=$((total + 1))
    if [ -n "$(find "$BUILD_DIR" \( -name "$tg" -perm -u+x -o -name "lib$tg.a" \) -type f -print -quit 2>/dev/null)" ]; then
      built=$((built + 1))
    fi
  done
  if ((brc == 0)); then
    note build ok "$(($(date +%s) - t)) s, $built/$total targets: $TARGETS"
  else
    why="rc $brc"; ((brc == 124)) && why="timed out"
    note build FAIL "$why after $(($(date +%s) - t)) s, $built/$total targets built; $(grep -c '^FAILED:' "$BUILD_LOG") failed steps (build.log)"
    fail_hint "$BUILD_LOG"
  fi
fi

# ---- 4. tests ------------------------------------------------------------------------------
TEST_LOG=$OUT/tests.log
: >"$TEST_LOG"
# run_label LABEL CAP: ctest -L LABEL; summary counts from ctest's own lines.
run_label() {
  local label=$1 cap=$2 t r
  t=$(date +%s)
  (cd "$BUILD_DIR" && timeout "$(limit 90 "$cap")" ctest -L "^$label\$" --output-on-failure \
       --timeout "$cap" -j 1) >"$OUT/ctest_$label.tmp" 2>&1
  r=$?
  cat "$OUT/ctest_$label.tmp" >>"$TEST_LOG"
  local passed failed skipped totalline status=ok
  passed=$(grep -cE 'Test +#[0-9]+: .* Passed' "$OUT/ctest_$label.tmp")
  failed=$(grep -cE 'Test +#[0-9]+: .*\*\*\*(Failed|Exception|Timeout|Not Run)' "$OUT/ctest_$label.tmp")
  skipped=$(grep -cE 'Test +#[0-9]+: .*Skipped' "$OUT/ctest_$label.tmp")
  totalline=$(grep -E 'tests passed|No tests were found' "$OUT/ctest_$label.tmp" | tail -1)
  grep -q 'No tests were found' "$OUT/ctest_$label.tmp" && status=none
  rm -f "$OUT/ctest_$label.tmp"
  if ((failed > 0)) || { [ "$status" = ok ] && ((r != 0)); }; then status=FAIL; fi
  note "ctest-$label" "$status" "$passed passed, $skipped skipped, $failed failed in $(($(date +%s) - t)) s; ${totalline:-rc $r}"
  if [ "$status" = FAIL ]; then
    grep -E 'Test +#[0-9]+: .*\*\*\*(Failed|Exception|Timeout|Not Run)' "$TEST_LOG" | head -n 10
    ((r == 124)) && echo "ctest -L $label ran out of its time limit"
  fi
}
if ((RUN_TESTS)) && [ -f "$BUILD_DIR/CTestTestfile.cmake" ]; then
  run_label gpu 150
  run_label torch2 90
  # The GpuTest SIGSEGV: every candidate cause in its own process (scripts/gpu_segv_probe.sh).
  t=$(date +%s)
  OUT=$OUT SEGV_PROBE_TEST_S=$(limit 150 60) timeout "$(limit 120 240)" \
    bash scripts/gpu_segv_probe.sh "$BUILD_DIR" >"$OUT/segv.log" 2>&1
  r=$?
  crashed=$(grep -c 'died of signal' "$OUT/segv/summary.txt" 2>/dev/null) || true
  if ((r == 0)); then
    note segv-probe ok "$(($(date +%s) - t)) s; ${crashed:-0} variants crashed (segv/summary.txt)"
  else
    note segv-probe FAIL "rc $r after $(($(date +%s) - t)) s (segv.log)"
  fi
fi

# ---- 5. benchmark and plan ---------------------------------------------------------------
BENCH=$(find "$BUILD_DIR" -name deepnet_bench_gpu -type f -perm -u+x -print -quit 2>/dev/null)
DEEPNET=$BUILD_DIR/bin/deepnet
if ((RUN_BENCH)) && [ -n "$BENCH" ]; then
  t=$(date +%s)
  blimit=$(limit 20 200)
  # The benchmark starts no configuration after --budget-s; the rest is for the last one.
  bargs=(--json "$OUT/bench.json" --jobs-dir "$BUILD_DIR/kit-jobs" --budget-s $((blimit * 2 / 3))
         --profile "$OUT/profile")
  ((DRY_RUN)) && bargs+=(--tiny)
  rm -rf "$BUILD_DIR/kit-jobs"
  timeout "$blimit" "$BENCH" "${bargs[@]}" >"$OUT/bench.log" 2>&1
  r=$?
  cat "$OUT/bench.log"
  if ((r == 0)); then
    note bench ok "$(($(date +%s) - t)) s; $(grep -m1 '^peak' "$OUT/bench.log")"
  else
    note bench FAIL "rc $r after $(($(date +%s) - t)) s (bench.log)"
    fail_hint "$OUT/bench.log"
  fi
  # deepnet plan for each benchmarked config, next to what the benchmark measured.
  if [ -x "$DEEPNET" ] && [ -d "$BUILD_DIR/kit-jobs" ]; then
    {
      printf '%-28s %-6s %12s %12s %8s\n' config prec "plan GiB" "measured GiB" ratio
      for job in "$BUILD_DIR"/kit-jobs/*.yaml; do
        [ -f "$job" ] || continue
        name=$(basename "$job" .yaml)
        prec=$(sed -n 's/^# precision: //p' "$job")
        measured=$(sed -n 's/^# measured_peak_bytes: //p' "$job")
        planned=$("$DEEPNET" plan "$job" --precision "${prec:-fp32}" --format tsv 2>>"$OUT/plan.err" \
                  | awk -F'\t' '$1=="memory_bytes"{print $2}')
        awk -v n="$name" -v p="${prec:-fp32}" -v a="${planned:-0}" -v b="${measured:-0}" 'BEGIN {
          printf "%-28s %-6s %12.2f %12.2f %8s\n", n, p, a/2^30, b/2^30, (b>0 ? sprintf("%.2f", a/b) : "-") }'
      done
    } >"$OUT/plan.txt"
    cat "$OUT/plan.txt"
    note plan ok "predicted vs measured peak memory in plan.txt"
  fi
elif ((RUN_BENCH)); then
  note bench FAIL "deepnet_bench_gpu was not built"
fi

# ---- 6. summary --------------------------------------------------------------------------
rm -f "$OUT/plan.err"
note total "$(grep -qE ' FAIL ' "$SUMMARY" && echo FAIL || echo ok)" "$(now) s of the ${BUDGET} s budget"
echo "===== gpu_check summary ($OUT) ====="
cat "$SUMMARY"
