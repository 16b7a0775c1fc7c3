#!/usr/bin/env bash
# One-thread A/B of the fused CPU kernels (docs/PERFORMANCE.md, "Fused CPU kernels"):
# deepnet_bench_train with the kernels on and off (DEEPNET_FUSED_KERNELS) and the PyTorch-eager
# reference, interleaved round by round so that load changes hit all three, for both shapes.
# Prints tokens per CPU second per round, the medians and the ratios.
#
#   ROUNDS=4 BUILD_DIR=build bash bench/fused_kernels_ab.sh      # about 14 minutes here
#
# The reference needs Debian's python3-torch (apt-get install -y python3-torch). Environment as
# in scripts/bench_env.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_PREFIX=deepnet-fused-ab
# shellcheck source=scripts/bench_env.sh
source "${ROOT}/scripts/bench_env.sh"
ROUNDS="${ROUNDS:-4}"
export OPENBLAS_NUM_THREADS=1

for round in $(seq 1 "${ROUNDS}"); do
  for shape in 100x100-d64 6x6-d512; do
    for fused in 1 0; do
      DEEPNET_FUSED_KERNELS=${fused} "${BENCH}" --shape "${shape}" --blas-threads 1 \
        --intra-threads 1 --steps 3 --warmup-steps 1 --runs 3 --json \
        > "${OUT_DIR}/${shape}_fused${fused}_r${round}.json"
    done
    "${PYTHON_TORCH}" "${REFERENCE}" --shape "${shape}" --threads 1 --json \
      > "${OUT_DIR}/${shape}_ref_r${round}.json"
  done
done

"${PYTHON_TORCH}" - "${OUT_DIR}" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
for shape in ["100x100-d64", "6x6-d512"]:
    medians = {}
    for kind, label in [("fused1", "fused on"), ("fused0", "fused off"), ("ref", "PyTorch ref")]:
        tokens, ratios = [], []
        for path in sorted(glob.glob(f"{out}/{shape}_{kind}_r*.json")):
            m = json.loads(open(path).read().strip().splitlines()[-1])["median"]
            tokens.append(m["tokens_per_cpu_s"])
            if "ratio_to_matmul_cpu" in m:
                ratios.append(m["ratio_to_matmul_cpu"])
        medians[kind] = statistics.median(tokens)
        extra = f", ratio to matmul {statistics.median(ratios):.3f}" if ratios else ""
        print(f"{shape} {label}: tokens per CPU s {[round(t) for t in tokens]} "
              f"median {medians[kind]:.0f}{extra}")
    print(f"{shape}: fused on / ref {medians['fused1'] / medians['ref']:.2f}x, "
          f"fused off / ref {medians['fused0'] / medians['ref']:.2f}x, "
          f"on / off {medians['fused1'] / medians['fused0']:.2f}x")
PY
echo "JSON in ${OUT_DIR}"
