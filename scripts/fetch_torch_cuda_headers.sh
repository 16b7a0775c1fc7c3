#!/usr/bin/env bash
# Fetches the LibTorch 2.6 CUDA headers that the CUDA compile check (scripts/cuda_compile_check.sh)
# compiles against: Debian trixie's libtorch-cuda-dev (contrib, ~2.4 MB), downloaded with a
# private apt setup and unpacked with dpkg -x into an ignored folder. Nothing is installed into /
# and no system apt state is touched. Needs only Debian's archive and no standard input.
#
#   bash scripts/fetch_torch_cuda_headers.sh     # -> .cache/torch-cuda/root/usr/include
#
# Safe to run again: an unpacked copy is kept. DEEPNET_TORCH_CUDA_MIRROR overrides the archive
# (default http://deb.debian.org/debian).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGE=libtorch-cuda-dev
SUITE=trixie
MIRROR=${DEEPNET_TORCH_CUDA_MIRROR:-http://deb.debian.org/debian}
DEST=$PWD/.cache/torch-cuda
INCLUDE=$DEST/root/usr/include
VERSION_H=$INCLUDE/torch/csrc/api/include/torch/version.h

if [ -f "$DEST/stamp" ] && [ -f "$VERSION_H" ]; then
  echo "[fetch-torch-cuda] present: $(cat "$DEST/stamp") in $INCLUDE"
  exit 0
fi

fail() {
  echo "[fetch-torch-cuda] error: $*" >&2
  echo "[fetch-torch-cuda] The CUDA compile check needs $PACKAGE from Debian $SUITE (contrib)." >&2
  echo "[fetch-torch-cuda] Check that $MIRROR is reachable (or set DEEPNET_TORCH_CUDA_MIRROR to" >&2
  echo "[fetch-torch-cuda] a Debian mirror) and run: bash scripts/fetch_torch_cuda_headers.sh" >&2
  exit 1
}

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || fail "$keyring is missing (package debian-archive-keyring)"

rm -rf "$DEST"
apt_dir=$DEST/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/etc" "$DEST/debs"
# contrib only: apt-get download resolves no dependencies, so trixie's main is not needed.
echo "deb [signed-by=$keyring] $MIRROR $SUITE contrib" >"$apt_dir/etc/sources.list"
apt_opts=(
  -q -o "Dir::Etc::SourceList=$apt_dir/etc/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
  -o "Dir::State::Status=/dev/null" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root"
  -o "APT::Architecture=amd64" -o "APT::Architectures=amd64"
)
echo "[fetch-torch-cuda] fetching $PACKAGE from $MIRROR $SUITE contrib"
apt-get "${apt_opts[@]}" update >"$apt_dir/update.log" 2>&1 ||
  { cat "$apt_dir/update.log" >&2; fail "apt-get update of $SUITE contrib failed"; }
(cd "$DEST/debs" && apt-get "${apt_opts[@]}" download "$PACKAGE") >"$apt_dir/download.log" 2>&1 ||
  { cat "$apt_dir/download.log" >&2; fail "apt-get download $PACKAGE failed"; }
deb=$(ls "$DEST"/debs/"$PACKAGE"_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "no $PACKAGE .deb was downloaded"
dpkg -x "$deb" "$DEST/root" || fail "dpkg -x $deb failed"
[ -f "$VERSION_H" ] || fail "$deb has no torch/version.h"
rm -rf "$apt_dir"
basename "$deb" >"$DEST/stamp"
echo "[fetch-torch-cuda] unpacked $(cat "$DEST/stamp") into $INCLUDE"
