#!/usr/bin/env bash
# Installs every Debian package DeepNet needs (without prompts), then configures and builds it
# (CMake, Release, Ninja, ccache). Safe to run again: installed packages are skipped and the
# build is incremental.
#
#   bash scripts/setup.sh            # install + build into ./build
#   BUILD_DIR=out bash scripts/setup.sh
# Run as root, it also creates the unprivileged account `deepnet-trainer` (no login, no home)
# that root worker daemons run trainers as (deepnet-worker --trainer-user deepnet-trainer).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev            # LibTorch 1.13 (CPU)
  libopenblas0-pthread    # without it LibTorch's matmuls use reference BLAS (~35x slower)
  libblas-dev             # cblas.h and -lblas for the fused kernels' per-head products
  libgloo-dev             # c10d's Gloo headers need it
  libabsl-dev libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev libcli11-dev libssl-dev
  libgtest-dev libgmock-dev googletest
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin prometheus-cpp-dev prometheus libsqlite3-dev openssl
  libsentencepiece-dev sentencepiece
  jq                      # scripts/demo.sh reads `deepnetctl workers -o json`
  gnuplot-nox             # `deepnet experiment` draws its plots with it (pngcairo)
  slurm-wlm munge         # ctest -L slurm: a private single-node Slurm 22.05 runs deploy/slurm/
  iproute2                # `ip netns`/`ip link`: the multi-host tests' hosts (tests/netns/, label netns)
  debian-archive-keyring  # verifies trixie's index for the LibTorch 2.x CUDA headers (below)
)

# Node.js and npm for the deploy schema checks (ctest -L npm: kubernetes-models, @grafana/schema,
# installed by the test itself with `npm ci` into the build tree). Only when absent: a machine
# with another Node.js (e.g. NodeSource's, which bundles npm) keeps it.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then PACKAGES+=(nodejs npm); fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "[setup] installing ${#missing[@]} packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "[setup] all ${#PACKAGES[@]} packages present"
fi

# OpenBLAS must be the BLAS LibTorch loads (it is the highest-priority alternative once installed).
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
case "$blas" in
  *openblas*) ;;
  *) echo "[setup] warning: libblas.so.3 is $blas, not OpenBLAS: matrix products will be slow" >&2 ;;
esac

# The account trainers run as under a root worker daemon (docs/OPERATIONS.md, "Storage layout").
if [ "$(id -u)" -eq 0 ] && ! id -u deepnet-trainer >/dev/null 2>&1; then
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin deepnet-trainer
  echo "[setup] created the unprivileged account deepnet-trainer (uid $(id -u deepnet-trainer))"
fi

# LibTorch 2.6 CUDA headers (Debian trixie's libtorch-cuda-dev, unpacked into .cache/torch-cuda,
# never installed) for the CUDA compile check that scripts/test.sh runs.
if [ "${DEEPNET_SKIP_CUDA_CHECK:-0}" = 1 ]; then
  echo "[setup] DEEPNET_SKIP_CUDA_CHECK=1: not fetching the LibTorch 2.x CUDA headers"
else
  bash scripts/fetch_torch_cuda_headers.sh
fi

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths under the checkout are hashed relative to it, so a fresh clone in another folder (as CI
# makes) hits the cache that an earlier build filled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
ccache --max-size=5G >/dev/null 2>&1 || true
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "[setup] built into $BUILD_DIR"
