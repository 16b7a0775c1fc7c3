#!/usr/bin/env bash
# Pipeline/data-parallel engine benchmarks (docs/PERFORMANCE.md, "Distributed engine"):
#   bubble  - measured idle fraction per stage vs (P-1)/(m+P-1), 1F1B, P in {2,4}, m in {4,8,16}
#   balance - max/mean measured stage compute for 24L-24L at P=4 vs the cost model's prediction
#   memory  - peak micro-batches holding activations per stage vs the schedule's bound
#   overlap - data-parallel all-reduce time hidden behind the backward pass (P=1, D=2)
# Every configuration runs RUNS times; tables show medians. Results are JSON lines in $OUT.
#   BUILD_DIR=build RUNS=3 bash bench/pipeline.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
RUNS=${RUNS:-3}
OUT=${OUT:-$(mktemp -d /tmp/deepnet-pipeline-bench-XXXXXX)}
mkdir -p "$OUT"
BENCH="$BUILD_DIR/bench/deepnet_bench_pipeline"
MPI=(mpirun --oversubscribe --allow-run-as-root --mca btl self,tcp --mca btl_tcp_if_include lo)
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SkylakeX  # See PERFORMANCE.md, "OpenBLAS core type".
fi
export OPENBLAS_NUM_THREADS=1

run() {  # name ranks args...
  local name=$1 ranks=$2
  shift 2
  for i in $(seq 1 "$RUNS"); do
    "${MPI[@]}" -np "$ranks" "$BENCH" --rendezvous "file://$OUT/$name-$i.rdv" "$@" \
      | grep '^{' >>"$OUT/$name.jsonl"
  done
}

for p in 2 4; do
  for m in 4 8 16; do
    run "bubble-p$p-m$m" "$p" --stages "$p" --micro-batches "$m" --encoder-layers 8 \
      --decoder-layers 8 --d-model 256 --ffn-dim 1024 --batch 8 --steps 3
  done
done
run "memory-gpipe-p2-m8" 2 --stages 2 --micro-batches 8 --schedule gpipe --encoder-layers 8 \
  --decoder-layers 8 --d-model 256 --ffn-dim 1024 --batch 8 --steps 3
for partition in flops measured; do
  flag=""
  [ "$partition" = measured ] && flag=--measured-costs
  run "balance-24x24-p4-$partition" 4 --stages 4 --micro-batches 8 --encoder-layers 24 \
    --decoder-layers 24 --d-model 128 --ffn-dim 512 --batch 8 --steps 3 $flag
done
run "overlap-d2" 2 --stages 1 --replicas 2 --micro-batches 2 --encoder-layers 8 \
  --decoder-layers 8 --d-model 512 --ffn-dim 2048 --batch 8 --steps 3 --bucket-mb 4 \
  --compare-overlap

python3 - "$OUT" <<'EOF'
import json, os, statistics, sys
out = sys.argv[1]
def load(name):
    with open(os.path.join(out, name + ".jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]
med = statistics.median
print("### Bubble (1F1B, 8L-8L d=256, 8 x 32+32 tokens per micro-batch)\n")
print("| P | m | predicted | measured idle per stage (median) | worst / predicted | CPU/wall |")
print("|---|---|---:|---|---:|---:|")
for p in (2, 4):
    for m in (4, 8, 16):
        runs = load(f"bubble-p{p}-m{m}")
        pred = runs[0]["predicted_bubble"]
        idle = [med([r["overlap"]["stages"][s]["replicas"][0]["idle_fraction"] for r in runs]) for s in range(p)]
        cpu = med([st["replicas"][0]["cpu_per_wall"] for r in runs for st in r["overlap"]["stages"]])
        print(f"| {p} | {m} | {pred:.3f} | {', '.join(f'{x:.3f}' for x in idle)} | {max(idle)/pred:.2f} | {cpu:.2f} |")
print("\n### Activation memory: peak micro-batches held per stage (median)\n")
print("| run | schedule bound | measured |")
print("|---|---|---|")
for name, sched in (("bubble-p2-m8", "1f1b"), ("bubble-p4-m8", "1f1b"), ("memory-gpipe-p2-m8", "gpipe")):
    runs = load(name)
    p = runs[0]["config"]["stages"]; m = runs[0]["config"]["micro_batches"]
    bound = [m if sched == "gpipe" else min(p - s, m) for s in range(p)]
    got = [med([r["overlap"]["stages"][s]["replicas"][0]["peak_live_micro_batches"] for r in runs]) for s in range(p)]
    print(f"| {name} ({sched}) | {bound} | {[int(x) for x in got]} |")
for partition in ("flops", "measured"):
    print(f"\n### Stage balance (24L-24L d=128, P=4, 1F1B m=8, partition: {partition})\n")
    runs = load(f"balance-24x24-p4-{partition}")
    print("| run | slices | predicted shares | measured shares (compute CPU) | measured max/mean |")
    print("|---|---|---|---|---:|")
    ratios = []
    for i, r in enumerate(runs):
        st = r["overlap"]["stages"]
        cpu = [s["replicas"][0]["compute_cpu_s"] for s in st]
        ratios.append(max(cpu) / (sum(cpu) / len(cpu)))
        slices = "; ".join(s["slice"] for s in st)
        predicted = ", ".join("%.3f" % s["predicted_cost_share"] for s in st)
        measured = ", ".join("%.3f" % (c / sum(cpu)) for c in cpu)
        print(f"| {i+1} | {slices} | {predicted} | {measured} | {ratios[-1]:.3f} |")
    print(f"\nmedian measured max/mean {med(ratios):.3f}")
print("\n### Data-parallel overlap (P=1, D=2, 8L-8L d=512, 4 MiB buckets)\n")
runs = load("overlap-d2")
def exposed(r, key):
    return max(st["replicas"][i]["reduce_wait_s"] for st in r[key]["stages"] for i in range(2))
no = med([exposed(r, "no_overlap") for r in runs]); yes = med([exposed(r, "overlap") for r in runs])
step_no = med([r["no_overlap"]["stages"][0]["replicas"][0]["step_s"] for r in runs])
step_yes = med([r["overlap"]["stages"][0]["replicas"][0]["step_s"] for r in runs])
print(f"all-reduce wait after backward: {no:.3f} s without overlap, {yes:.3f} s with; hidden {1 - yes/no:.1%}")
print(f"step time: {step_no:.3f} s without overlap, {step_yes:.3f} s with")
print(f"\n(raw JSON lines: {out})")
EOF
