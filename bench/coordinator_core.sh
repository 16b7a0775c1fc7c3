#!/usr/bin/env bash
# The coordinator core in process (bench/coordinator_core_bench.cc; docs/PERFORMANCE.md,
# "Coordinator core"), optionally side by side with another build of it (e.g. the commit before
# a refactor), the two alternating run by run so both see the same machine:
#   BUILD_DIR=build RUNS=5 bash bench/coordinator_core.sh [BASELINE_BUILD_DIR]
# Prints, per phase, the median over runs of each run's p50/p99/mean, and the ratio
# this/baseline of the medians.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
RUNS=${RUNS:-5}
ARGS=${ARGS:---jobs 5000 --workers 64 --slots 8 --rounds 400}
BASELINE=${1:-}
OUT=${OUT:-$(mktemp -d /tmp/deepnet-coordinator-core-bench-XXXXXX)}
mkdir -p "$OUT"
this="$BUILD_DIR/bench/deepnet_bench_coordinator_core"
[ -x "$this" ] || { echo "no $this: build the target deepnet_bench_coordinator_core" >&2; exit 1; }
if [ -n "$BASELINE" ]; then
  base="$BASELINE/bench/deepnet_bench_coordinator_core"
  [ -x "$base" ] || { echo "no $base" >&2; exit 1; }
fi
for i in $(seq 1 "$RUNS"); do
  # shellcheck disable=SC2086
  "$this" $ARGS 2>&1 | tail -n 1 > "$OUT/this-$i.json"
  # shellcheck disable=SC2086
  if [ -n "$BASELINE" ]; then "$base" $ARGS 2>&1 | tail -n 1 > "$OUT/base-$i.json"; fi
done
python3 - "$OUT" "$RUNS" "${BASELINE:+1}" <<'PY'
import json, os, statistics, sys
out, runs, with_base = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
def load(who):
    return [json.load(open(os.path.join(out, f"{who}-{i}.json"))) for i in range(1, runs + 1)]
this = load("this")
base = load("base") if with_base else None
print(f"runs: {runs}; results in {out}")
print(f"{'phase':<11}{'figure':<9}{'this':>12}" + (f"{'baseline':>12}{'ratio':>8}" if with_base else ""))
for phase in ["submit", "heartbeat", "churn", "tick_idle", "restart"]:
    for fig in (["p50_us", "p99_us", "mean_us"] if phase != "restart" else ["total_ms"]):
        t = statistics.median(r[phase][fig] for r in this)
        line = f"{phase:<11}{fig:<9}{t:>12.1f}"
        if with_base:
            b = statistics.median(r[phase][fig] for r in base)
            line += f"{b:>12.1f}{t / b if b else float('nan'):>8.2f}"
        print(line)
PY
