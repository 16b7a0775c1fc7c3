#!/usr/bin/env bash
# Gathers, on a machine with Debian bookworm's archive, the .deb packages that the trainer-side
# build needs and that the GPU test machine (PyTorch 2.x + CUDA, no network) may lack, into an
# ignored folder that travels with the working tree: .cache/gpu-bundle/ (a few tens of MiB).
# scripts/gpu_check.sh unpacks, on the GPU machine, only the groups whose files that machine
# lacks, into a private prefix (never into /). Nothing is installed here; the system is untouched.
#
#   bash scripts/gpu_bundle.sh              # download (again, if the list changed)
#   BUNDLE_DIR=/tmp/b bash scripts/gpu_bundle.sh
#
# The packages are bookworm's (glibc 2.36, GCC 12's libstdc++): they run on any x86-64 Linux with
# glibc >= 2.36 (Ubuntu 24.04 has 2.39); gpu_check.sh checks that before it uses them.
# Base libraries every such system has (libc6, libstdc++6, libgcc-s1, zlib1g, libssl3) are left
# out. Each group lists its development packages and the runtime libraries they load (the
# closure of `ldd` over the group's binaries and libraries, as of bookworm 12.11).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUNDLE_DIR=${BUNDLE_DIR:-.cache/gpu-bundle}

# group: packages. The groups are what gpu_check.sh decides on: all of a group or none of it,
# so that (say) gRPC never mixes with another release of abseil or protobuf.
GROUPS_SPEC=(
  "pkgconf: pkgconf pkgconf-bin libpkgconf3"
  "grpc: libgrpc++-dev libgrpc++1.51 libgrpc-dev libgrpc29 libprotobuf-dev libprotobuf32
         libprotobuf-lite32 protobuf-compiler libprotoc32 protobuf-compiler-grpc libabsl-dev
         libabsl20220623 libre2-dev libre2-9 libc-ares-dev libc-ares2 zlib1g-dev"
  "yaml: libyaml-cpp-dev libyaml-cpp0.7"
  "json: nlohmann-json3-dev"
  "spdlog: libspdlog-dev libspdlog1.10 libfmt-dev libfmt9"
  "cli11: libcli11-dev"
  "gtest: libgtest-dev libgmock-dev"
  "ssl: libssl-dev"
  "sentencepiece: libsentencepiece-dev libsentencepiece0"
  "mpi: libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7
        libevent-pthreads-2.1-7 libpmix2 libfabric1 libibverbs1 librdmacm1 libucx0 libpsm2-2
        libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 libatomic1
        libudev1 libuuid1"
  "sqlite: libsqlite3-dev libsqlite3-0"
  "prometheus: prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
        libprometheus-cpp-push1.0 libcivetweb-dev libcivetweb1 civetweb libcurl4-openssl-dev
        libcurl4"
)

mkdir -p "$BUNDLE_DIR/debs"
manifest="$BUNDLE_DIR/groups.txt"
: >"$manifest.new"
all=()
for spec in "${GROUPS_SPEC[@]}"; do
  group=${spec%%:*}
  read -r -d "" -a pkgs <<<"${spec#*:}" || true
  echo "$group ${pkgs[*]}" >>"$manifest.new"
  all+=("${pkgs[@]}")
done

# One download per missing file; apt-get download names files <pkg>_<version>_<arch>.deb.
missing=()
for pkg in "${all[@]}"; do
  if ! compgen -G "$BUNDLE_DIR/debs/${pkg}_*.deb" >/dev/null; then missing+=("$pkg"); fi
done
if ((${#missing[@]})); then
  echo "[gpu_bundle] downloading ${#missing[@]} packages"
  (cd "$BUNDLE_DIR/debs" && apt-get download -q "${missing[@]}")
fi
mv "$manifest.new" "$manifest"
{
  echo "debian $(cat /etc/debian_version 2>/dev/null || echo unknown)"
  echo "glibc $(ldd --version | head -1 | awk '{print $NF}')"
  echo "date $(date -u +%Y-%m-%dT%H:%MZ)"
} >"$BUNDLE_DIR/origin.txt"
size=$(du -sh "$BUNDLE_DIR" | cut -f1)
echo "[gpu_bundle] $(ls "$BUNDLE_DIR"/debs/*.deb | wc -l) packages, $size in $BUNDLE_DIR"
