#!/usr/bin/env bash
# Sets up (packages + build, see setup.sh), runs the CUDA compile check (every LibTorch
# translation unit compiled against LibTorch 2.x CUDA headers, scripts/cuda_compile_check.sh) and
# every test with CTest. Fails when either fails; both run.
#
# DEEPNET_SKIP_CUDA_CHECK=1 skips the compile check, for developers without the CUDA toolkit
# only: CI never sets it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
cuda_check=0
if [ "${DEEPNET_SKIP_CUDA_CHECK:-0}" = 1 ]; then
  echo "[test] WARNING: DEEPNET_SKIP_CUDA_CHECK=1, the CUDA compile check is skipped" >&2
else
  bash scripts/cuda_compile_check.sh || cuda_check=$?
fi
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 600 -j"$(nproc)")
if ((cuda_check != 0)); then
  echo "[test] FAILED: the CUDA compile check (lines starting [cuda-check] above say what to fix)" >&2
  exit 1
fi
