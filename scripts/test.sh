#!/usr/bin/env bash
# Sets up (packages + build, see setup.sh) and runs every test with CTest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 600 -j"$(nproc)"
