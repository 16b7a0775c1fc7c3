#!/usr/bin/env bash
# Waits until the coordinator reports enough ready worker daemons with enough free slots, by
# asking it (`deepnetctl workers -o json`), never by sleeping a guessed time.
#
#   scripts/wait_for_workers.sh WORKERS FREE_SLOTS TIMEOUT_S [PID ...]
#
# WORKERS: ready workers needed; FREE_SLOTS: free slots needed on ready workers in total;
# TIMEOUT_S: give up after this many seconds. Each PID (a worker daemon this caller started)
# must stay alive: one that exits ends the wait at once. deepnetctl is $CTL (default: the
# installed one, ../../bin/deepnetctl beside P/libexec/deepnet/ where `cmake --install` puts this
# script, else build/bin/deepnetctl, else deepnetctl on PATH) and reaches the coordinator through
# DEEPNET_COORDINATOR and DEEPNET_TOKEN as usual. Exit 0 once ready (printing the worker table), 1 on timeout or a dead
# worker (with the last answer), 2 on bad arguments.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 WORKERS FREE_SLOTS TIMEOUT_S [PID ...]" >&2
  exit 2
fi
need_workers=$1 need_slots=$2 timeout_s=$3
shift 3
for n in "$need_workers" "$need_slots" "$timeout_s"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "$0: not a non-negative integer: '$n'" >&2; exit 2; }
done
if [ -z "${CTL:-}" ]; then
  installed=$(dirname "${BASH_SOURCE[0]}")/../../bin/deepnetctl
  if [ -x "$installed" ]; then CTL=$installed
  elif [ -x build/bin/deepnetctl ]; then CTL=build/bin/deepnetctl
  else CTL=deepnetctl
  fi
fi
deadline=$(($(date +%s) + timeout_s))
last=""
while :; do
  # "ready_workers free_slots" among READY workers; empty while the coordinator cannot answer.
  last=$("$CTL" workers -o json 2>&1) || last="deepnetctl workers failed: $last"
  counts=$(printf '%s' "$last" | jq -r '[.workers[]? | select(.state == "WORKER_STATE_READY")]
      | "\(length) \(map(.slots_free // 0) | add // 0)"' 2>/dev/null) || counts=""
  if [ -n "$counts" ] && [ "${counts%% *}" -ge "$need_workers" ] &&
     [ "${counts##* }" -ge "$need_slots" ]; then
    echo "[wait] ${counts%% *} ready workers, ${counts##* } free slots"
    "$CTL" workers
    exit 0
  fi
  for pid in "$@"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "[wait] worker daemon (pid $pid) exited before it was ready" >&2
      exit 1
    fi
  done
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "[wait] after ${timeout_s} s: need $need_workers ready workers with $need_slots free" \
      "slots, have ${counts:-none}; the coordinator said:" >&2
    printf '%s\n' "$last" >&2
    exit 1
  fi
  sleep 0.5
done
