#!/usr/bin/env bash
# Smoke test of an image written by scripts/image_build.sh: unpacks the OCI image (umoci), then
# runs its root file system as a container would, without a container engine: in private mount
# and PID namespaces, chroot'ed into it, as the image's unprivileged user (10001:10001), sharing
# this machine's loopback. From inside the image it runs scripts/check_installed.sh, the checks
# the install test (ctest -L install) runs on `cmake --install` too, on prefix /usr/local:
#   1. every program answers --version with the project's version (libraries resolve) and --help;
#   2. `deepnet train` validates an installed example and runs two steps of it to a checkpoint
#      (LibTorch loads);
#   3. a coordinator and a worker start, both answer the gRPC health check that kubelet's probes
#      make (`deepnetctl health`), the worker registers and reports READY (wait_for_workers.sh
#      from /usr/local/libexec/deepnet, which asks the coordinator with the image's deepnetctl),
#      and the coordinator's /metrics counts it.
#
#   bash scripts/image_smoke.sh cpu|cuda          # after scripts/image_build.sh cpu|cuda
#
# Prints the seconds it took. Needs root (namespaces, chroot) and umoci. The cuda image runs
# its checks 1 and 3 only: without a GPU `deepnet train` would need runtime.device=cpu, which
# its LibTorch also runs (set DEEPNET_SMOKE_TRAIN=1 to include check 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "${1:-}" in
  cpu) name=deepnet train=${DEEPNET_SMOKE_TRAIN:-1} ;;
  cuda) name=deepnet-cuda train=${DEEPNET_SMOKE_TRAIN:-0} ;;
  *) echo "usage: $0 cpu|cuda" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "image_smoke: run as root (namespaces, chroot)" >&2; exit 2; }
version=$(sed -n 's/^project(deepnet VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
IMAGE_DIR=${IMAGE_DIR:-build/images}
layout=$IMAGE_DIR/$name
[ -d "$layout" ] || { echo "image_smoke: no image at $layout (scripts/image_build.sh $1)" >&2; exit 2; }
start=$(date +%s)
fail() { echo "image_smoke: FAILED: $*" >&2; exit 1; }

bundle=$IMAGE_DIR/$name-smoke
rm -rf "$bundle"
umoci unpack --image "$layout:$version" "$bundle" > /dev/null || fail "umoci unpack $layout:$version"
root=$bundle/rootfs
unpacked=$(date +%s)
echo "[image_smoke] unpacked $name:$version in $((unpacked - start)) s ($(du -sh "$root" | cut -f1))"

# What runs inside: as the image's user, in the image's /home/deepnet.
cp scripts/check_installed.sh "$root/home/deepnet/check_installed.sh"
cat > "$root/home/deepnet/smoke.sh" <<'EOF'
set -euo pipefail
echo "inside the image: uid $(id -u), gid $(id -g)"
[ "$(id -u)" = 10001 ] || { echo "inside the image: FAILED: not running as uid 10001" >&2; exit 1; }
exec bash /home/deepnet/check_installed.sh /usr/local "$1" /home/deepnet "$2"
EOF
chown -R 10001:10001 "$root/home/deepnet"

# Private mount and PID namespaces: /proc, /dev and /tmp for the image go away with them.
unshare --mount --pid --fork --kill-child /bin/bash -c '
  set -e
  root=$1
  mount --make-rprivate /
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs tmpfs "$root/tmp"
  exec chroot --userspec=10001:10001 "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin \
    HOME=/home/deepnet /bin/bash /home/deepnet/smoke.sh "$2" "$3"
' smoke "$root" "$version" "$train" || fail "the checks inside the image"
end=$(date +%s)
rm -rf "$bundle"
echo "[image_smoke] passed: $name:$version; unpack $((unpacked - start)) s, checks $((end - unpacked)) s"
