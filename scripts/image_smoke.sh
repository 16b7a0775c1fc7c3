#!/usr/bin/env bash
# Smoke test of an image written by scripts/image_build.sh: unpacks the OCI image (umoci), then
# runs its root file system as a container would, without a container engine: in private mount
# and PID namespaces, chroot'ed into it, as the image's unprivileged user (10001:10001), sharing
# this machine's loopback. Checks, all from inside the image:
#   1. every program answers --version with the project's version (libraries resolve);
#   2. `deepnet train` runs two steps of an installed example to a checkpoint (LibTorch loads);
#   3. a coordinator and a worker start, both answer the gRPC health check that kubelet's probes
#      make (`deepnetctl health`), the worker registers and reports READY (wait_for_workers.sh
#      from /usr/local/libexec/deepnet, which asks the coordinator with the image's deepnetctl),
#      and the coordinator serves /metrics.
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
cat > "$root/home/deepnet/smoke.sh" <<'EOF'
set -euo pipefail
version=$1 train=$2
cd /home/deepnet
fail() { echo "inside the image: FAILED: $*" >&2; exit 1; }
echo "inside the image: uid $(id -u), gid $(id -g)"
[ "$(id -u)" = 10001 ] || fail "not running as uid 10001"
for program in deepnet deepnet-coordinator deepnet-worker deepnetctl; do
  out=$($program --version) || fail "$program --version"
  [[ $out == "$version"* ]] || fail "$program --version printed '$out'"
done
echo "inside the image: all four programs print $version"
if [ "$train" = 1 ]; then
  deepnet train --config /usr/local/share/deepnet/examples/synthetic_small.yaml \
    --set train.max_steps=2 --set checkpoint.dir=/home/deepnet/checkpoints > train.log 2>&1 ||
    { tail train.log; fail "deepnet train"; }
  [ -d checkpoints/step_000000002 ] || fail "no checkpoint"
  echo "inside the image: deepnet train wrote checkpoints/step_000000002"
fi
user_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
worker_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s smoke user\n%s workers worker\n' "$user_token" "$worker_token" > tokens
printf '%s\n' "$worker_token" > worker.token
deepnet-coordinator --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --db coordinator.db \
  --tokens-file tokens --port-file ports > coordinator.log 2>&1 &
coordinator=$!
for _ in $(seq 300); do [ -f ports ] && break; sleep 0.1; done
[ -f ports ] || { cat coordinator.log; fail "the coordinator did not start"; }
port=$(sed -n 's/^grpc=//p' ports) metrics=$(sed -n 's/^metrics=//p' ports)
export DEEPNET_COORDINATOR=127.0.0.1:$port DEEPNET_TOKEN=$user_token
deepnet-worker --coordinator "127.0.0.1:$port" --name smoke --slots 1 --work-dir worker \
  --token-file worker.token --listen 127.0.0.1:0 > worker.log 2>&1 &
worker=$!
bash /usr/local/libexec/deepnet/wait_for_workers.sh 1 1 60 "$worker" ||
  { tail worker.log coordinator.log; fail "the worker did not become ready"; }
worker_port=$(sed -n 's/.*health on port \([0-9]*\).*/\1/p' worker.log)
for address in "127.0.0.1:$port" "127.0.0.1:$worker_port"; do
  [ "$(DEEPNET_TOKEN= deepnetctl health "$address")" = SERVING ] ||
    fail "deepnetctl health $address"
done
exec 3<>"/dev/tcp/127.0.0.1/$metrics"
printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
page=$(cat <&3)
grep -q "^deepnet_workers{.*state=\"ready\".*} 1" <<<"$page" ||
  fail "/metrics: $(grep '^deepnet_workers' <<<"$page")"
echo "inside the image: coordinator ($port) and worker ($worker_port) SERVING to deepnetctl health;" \
  "worker READY; /metrics on $metrics"
kill -TERM "$worker" "$coordinator"
wait "$worker" "$coordinator" || true
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
