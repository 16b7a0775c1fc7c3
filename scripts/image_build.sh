#!/usr/bin/env bash
# Builds the container images from Debian's archive alone (no Docker Hub, no PyPI): a root file
# system made by mmdebstrap with the run-time packages only (no -dev packages, no apt, no
# compiler), the install layout (`cmake --install`, cmake/install.cmake) under /usr/local, and an
# unprivileged user `deepnet` (uid/gid 10001, as deploy/kubernetes runs the pods) that the
# daemons run as; written with umoci as an OCI image, also packed as an oci-archive.
#
#   bash scripts/image_build.sh cpu     # deepnet:VERSION       (bookworm, LibTorch 1.13 CPU)
#   bash scripts/image_build.sh cuda    # deepnet-cuda:VERSION  (trixie, LibTorch 2.6 with CUDA)
#
# VERSION is project(VERSION) in CMakeLists.txt. Results in $IMAGE_DIR (default build/images):
#   NAME/            OCI image layout, tag VERSION   (skopeo/podman: oci:build/images/NAME:VERSION)
#   NAME-VERSION.tar the same as an oci-archive     (podman load -i; skopeo copy oci-archive:...)
#   NAME-rootfs/     the root file system as built  (scripts/image_smoke.sh runs it)
#   NAME.timings     seconds per phase, sizes
#
# cpu: the programs are those of $BUILD_DIR (default build; built on this bookworm machine, so
# they match bookworm's libraries); the run-time packages are found from the libraries the
# installed programs need (dpkg -S), plus jq for wait_for_workers.sh.
# cuda: trixie's LibTorch 2.6 with CUDA needs trixie's glibc and compiler, so the programs are
# built inside a trixie build root file system (cmake, gcc, the -dev packages, libtorch-cuda-dev)
# from this checkout, then installed into a trixie run-time root file system (libtorch-cuda and
# the other run-time libraries). Run by hand: several GB of packages (docs/OPERATIONS.md,
# "Images", records its last run). Needs root (mmdebstrap --mode=root), mmdebstrap and umoci
# (apt-get install mmdebstrap umoci).
#
# Environment: BUILD_DIR, IMAGE_DIR, DEEPNET_IMAGE_MIRROR (default: this machine's apt sources
# for cpu, http://deb.debian.org/debian for cuda), DEEPNET_IMAGE_KEEP_BUILDROOT=1 (cuda: keep
# the build root file system).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD

flavour=${1:-}
case "$flavour" in
  cpu) name=deepnet suite=bookworm ;;
  cuda) name=deepnet-cuda suite=trixie ;;
  *) echo "usage: $0 cpu|cuda" >&2; exit 2 ;;
esac
for tool in mmdebstrap umoci; do
  command -v "$tool" >/dev/null ||
    { echo "image_build: $tool is missing (apt-get install mmdebstrap umoci)" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "image_build: run as root (mmdebstrap --mode=root)" >&2; exit 2; }

version=$(sed -n 's/^project(deepnet VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || { echo "image_build: no project(deepnet VERSION ...) in CMakeLists.txt" >&2; exit 2; }
BUILD_DIR=${BUILD_DIR:-build}
IMAGE_DIR=${IMAGE_DIR:-build/images}
mkdir -p "$IMAGE_DIR"
IMAGE_DIR=$(cd "$IMAGE_DIR" && pwd)
rootfs=$IMAGE_DIR/$name-rootfs
layout=$IMAGE_DIR/$name
timings=$IMAGE_DIR/$name.timings
: > "$timings"
log() { echo "[image_build] $(date +%H:%M:%S) $*"; }
phase_start=$(date +%s)
phase() {  # name: records the seconds since the last phase
  local now; now=$(date +%s)
  echo "$1_s=$((now - phase_start))" >> "$timings"
  phase_start=$now
}

# Files a minimal image does not need; copyright files stay.
dpkg_opts=(
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/lintian/*'
  --aptopt='Acquire::Languages "none"' --aptopt='APT::Install-Recommends "false"'
)
# The unprivileged account, written directly (the image has no useradd), and a home that is
# its working folder.
user_hook='echo "deepnet:x:10001:10001:DeepNet daemons:/home/deepnet:/usr/sbin/nologin" >> "$1/etc/passwd";
  echo "deepnet:x:10001:" >> "$1/etc/group";
  echo "deepnet:!:19000::::::" >> "$1/etc/shadow";
  mkdir -p "$1/home/deepnet" "$1/shared"; chown 10001:10001 "$1/home/deepnet" "$1/shared"'
# No apt state or caches in the image.
clean_hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/* "$1"/tmp/*'

# mmdebstrap [options] SUITE TARGET SOURCES: the sources as given.
sources_cpu() {
  if [ -n "${DEEPNET_IMAGE_MIRROR:-}" ]; then
    echo "deb $DEEPNET_IMAGE_MIRROR bookworm main"
    echo "deb $DEEPNET_IMAGE_MIRROR bookworm-updates main"
  else
    # This machine's Debian sources (bookworm, -updates, -security): the programs were built
    # against their libraries.
    sed -n 's/^URIs: *//p;s/^Suites: *//p' /etc/apt/sources.list.d/debian.sources |
      paste - - | while read -r uri suites; do
        for s in $suites; do echo "deb $uri $s main"; done
      done
  fi
}

# The Debian packages holding the libraries that the installed programs link directly (apt
# brings what those need), on this machine.
runtime_packages() {  # prefix
  local files=("$1"/bin/* "$1"/lib/deepnet/*.so) needed
  needed=$(for f in "${files[@]}"; do readelf -d "$f"; done |
    sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u | tr '\n' ' ')
  for f in "${files[@]}"; do ldd "$f"; done | awk -v needed=" $needed" \
    'index(needed, " " $1 " ") && $3 ~ /^\// {print $3}' | sort -u |
    while read -r lib; do
      dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null ||
        echo "image_build: no package holds $lib" >&2
    done | cut -d: -f1 | sort -u
}

# The image from a finished root file system: one layer, the user, entry point and environment.
write_image() {
  log "writing the OCI image $name:$version"
  rm -rf "$layout" "$IMAGE_DIR/$name-$version.tar"
  umoci init --layout "$layout"
  umoci new --image "$layout:$version"
  umoci insert --image "$layout:$version" "$rootfs" /
  umoci config --image "$layout:$version" --author "DeepNet scripts/image_build.sh" \
    --config.user 10001:10001 --config.workingdir /home/deepnet \
    --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.env HOME=/home/deepnet \
    --config.cmd deepnet-coordinator --config.cmd --help \
    --config.exposedports 7070/tcp --config.exposedports 7071/tcp \
    --config.exposedports 9464/tcp \
    --config.label org.opencontainers.image.version="$version" \
    --config.label org.opencontainers.image.title="$name"
  umoci gc --layout "$layout"
  tar -C "$layout" -cf "$IMAGE_DIR/$name-$version.tar" .
  phase image
  {
    echo "rootfs_bytes=$(du -sb "$rootfs" | cut -f1)"
    echo "layout_bytes=$(du -sb "$layout" | cut -f1)"
    echo "packages=$(chroot "$rootfs" dpkg-query -W -f='.\n' | wc -l)"
  } >> "$timings"
  log "done: $IMAGE_DIR/$name-$version.tar; $(tr '\n' ' ' < "$timings")"
}

if [ "$flavour" = cpu ]; then
  for program in deepnet deepnet-worker deepnet-coordinator deepnetctl; do
    [ -x "$BUILD_DIR/bin/$program" ] ||
      { echo "image_build: $BUILD_DIR/bin/$program is missing: build first (scripts/setup.sh)" >&2; exit 2; }
  done
  stage=$IMAGE_DIR/$name-stage
  rm -rf "$stage"
  DESTDIR=$stage cmake --install "$BUILD_DIR" --prefix /usr/local > "$IMAGE_DIR/$name.install.log"
  mapfile -t packages < <(runtime_packages "$stage/usr/local")
  packages+=(jq)
  log "run-time packages (${#packages[@]}): ${packages[*]}"
  phase install
  rm -rf "$rootfs"
  sources_cpu > "$IMAGE_DIR/$name.sources.list"
  mmdebstrap --mode=root --variant=essential --include="$(IFS=,; echo "${packages[*]}")" \
    "${dpkg_opts[@]}" \
    --customize-hook="cp -a '$stage/usr/local/.' \"\$1/usr/local/\"" \
    --customize-hook="$user_hook" --customize-hook="$clean_hook" \
    bookworm "$rootfs" "$IMAGE_DIR/$name.sources.list"
  rm -rf "$stage"
  phase rootfs
  write_image
  exit 0
fi

# cuda ------------------------------------------------------------------------------------------
mirror=${DEEPNET_IMAGE_MIRROR:-http://deb.debian.org/debian}
# libtorch-cuda-2.6 depends on nvidia-cudnn (contrib), an installer whose postinst downloads
# cuDNN 9.0 from developer.download.nvidia.com (NVIDIA's licence question defaults to "I Agree"):
# the one part that is not in Debian's archive. Where NVIDIA's server cannot be reached, the
# build root fails there (docs/OPERATIONS.md, "CUDA image").
trixie_sources="deb $mirror trixie main contrib non-free non-free-firmware"
build_packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libtorch-cuda-dev libopenblas0-pthread libblas-dev libgloo-cuda-dev
  libabsl-dev libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev libcli11-dev libssl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libopenmpi-dev prometheus-cpp-dev libsqlite3-dev libsentencepiece-dev libgtest-dev
  nvidia-cuda-toolkit libnccl-dev
)
buildroot=$IMAGE_DIR/$name-buildroot
log "trixie build root ($buildroot): ${build_packages[*]}"
rm -rf "$buildroot"
mmdebstrap --mode=root --variant=apt --include="$(IFS=,; echo "${build_packages[*]}")" \
  "${dpkg_opts[@]}" trixie "$buildroot" "$trixie_sources"
phase buildroot
log "building DeepNet inside the trixie build root"
mkdir -p "$buildroot/src"
git -C "$repo" archive HEAD | tar -x -C "$buildroot/src"
chroot "$buildroot" /bin/bash -c 'cd /src && cmake -S . -B build -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DDEEPNET_BUILD_TESTS=OFF -DDEEPNET_BUILD_BENCH=OFF &&
  cmake --build build -j"$(nproc)" --target deepnet deepnet-worker deepnet-coordinator deepnetctl \
    deepnet_spm && DESTDIR=/stage cmake --install build --prefix /usr/local'
phase build
mapfile -t packages < <(
  for f in "$buildroot"/stage/usr/local/bin/* "$buildroot"/stage/usr/local/lib/deepnet/*.so; do
    chroot "$buildroot" ldd "${f#"$buildroot"}"
  done | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
    chroot "$buildroot" sh -c "dpkg -S \"\$(readlink -f '$lib')\" 2>/dev/null || dpkg -S '$lib'" || true
  done | cut -d: -f1 | sort -u)
packages+=(jq)
log "run-time packages (${#packages[@]}): ${packages[*]}"
rm -rf "$rootfs"
mmdebstrap --mode=root --variant=essential --include="$(IFS=,; echo "${packages[*]}")" \
  "${dpkg_opts[@]}" \
  --customize-hook="cp -a '$buildroot/stage/usr/local/.' \"\$1/usr/local/\"" \
  --customize-hook="$user_hook" --customize-hook="$clean_hook" \
  trixie "$rootfs" "$trixie_sources"
[ "${DEEPNET_IMAGE_KEEP_BUILDROOT:-0}" = 1 ] || rm -rf "$buildroot"
phase rootfs
write_image
