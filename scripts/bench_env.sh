# Sourced by the training benchmarks (scripts/bench.sh, bench/fused_kernels_ab.sh); not run.
# In: ROOT (the checkout), OUT_PREFIX (name of a fresh results folder under /tmp), and from the
# environment BUILD_DIR (default build), OUT_DIR, OPENBLAS_CORETYPE, PYTHON_TORCH.
# Out: BUILD_DIR made absolute, BENCH (deepnet_bench_train, which must exist), REFERENCE and
# PYTHON_TORCH (the PyTorch-eager reference and its interpreter), OUT_DIR (created), and
# OPENBLAS_CORETYPE exported. OpenBLAS 0.3.21 does not recognise every recent CPU and may fall
# back to its generic kernels (docs/PERFORMANCE.md, "OpenBLAS core type"): unset, it becomes
# SkylakeX on AVX-512 CPUs and Haswell on AVX2 ones; set it to "" for OpenBLAS's own choice.
BUILD_DIR="${BUILD_DIR:-build}"
case "${BUILD_DIR}" in /*) ;; *) BUILD_DIR="${ROOT}/${BUILD_DIR}" ;; esac
BENCH="${BUILD_DIR}/bench/deepnet_bench_train"
REFERENCE="${ROOT}/bench/reference_deepnet.py"
PYTHON_TORCH="${PYTHON_TORCH:-/usr/bin/python3}"
OUT_DIR="${OUT_DIR:-$(mktemp -d "/tmp/${OUT_PREFIX}.XXXXXX")}"
mkdir -p "${OUT_DIR}"

if [[ ! -x "${BENCH}" ]]; then
  echo "missing ${BENCH}; build it first: cmake --build ${BUILD_DIR} --target deepnet_bench_train" >&2
  exit 1
fi

if [[ -z "${OPENBLAS_CORETYPE+set}" ]]; then
  if grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
if [[ -z "${OPENBLAS_CORETYPE:-}" ]]; then unset OPENBLAS_CORETYPE; fi
