#!/usr/bin/env bash
# Training-throughput benchmark (docs/PERFORMANCE.md): deepnet_bench_train and the PyTorch-eager
# reference (bench/reference_deepnet.py) for both shapes, with one thread and with the defaults,
# then the thread-configuration comparison; prints a summary table of medians and ratios.
#
#   cmake --build build --target deepnet_bench_train && scripts/bench.sh
#
# Environment:
#   BUILD_DIR   build tree holding bench/deepnet_bench_train (default: build)
#   OUT_DIR     where the JSON results go (default: a new directory under /tmp)
#   RUNS        timed runs per measurement; the median is reported (default: 5)
#   QUICK=1     fewer steps and runs, for a smoke test
#   SKIP_REFERENCE=1, SKIP_THREADS=1   leave out the PyTorch reference / the thread comparison
#   OPENBLAS_CORETYPE  OpenBLAS kernel set. OpenBLAS 0.3.21 does not recognise this machine's
#                      Xeon (family 6, model 207) and falls back to its generic "Prescott"
#                      kernels, about 5x slower than "SkylakeX" on AVX-512 (docs/PERFORMANCE.md).
#                      Unset here, the script picks SkylakeX on AVX-512 CPUs and Haswell on
#                      AVX2 ones; set it to "" to measure OpenBLAS's own choice.
# The PyTorch reference needs Debian's python3-torch (not installed by scripts/setup.sh):
#   apt-get install -y --no-install-recommends python3-torch
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_PREFIX=deepnet-bench
# shellcheck source=scripts/bench_env.sh
source "${ROOT}/scripts/bench_env.sh"
RUNS="${RUNS:-5}"

# Steps per run: about 5-8 s per run for each shape.
if [[ "${QUICK:-0}" == 1 ]]; then
  RUNS=2; STEPS_D512=1; STEPS_D64=2; WARMUP=1
else
  STEPS_D512=4; STEPS_D64=8; WARMUP=2
fi
steps_for() { if [[ "$1" == 6x6-d512 ]]; then echo "${STEPS_D512}"; else echo "${STEPS_D64}"; fi; }

have_reference=0
if [[ "${SKIP_REFERENCE:-0}" != 1 ]]; then
  if "${PYTHON_TORCH}" -c 'import torch' 2>/dev/null; then
    have_reference=1
  else
    echo "note: ${PYTHON_TORCH} cannot import torch; PyTorch reference skipped" \
         "(apt-get install -y --no-install-recommends python3-torch)" >&2
  fi
fi

CORES="$(nproc)"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), ${CORES} cores"
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>} ATEN_CPU_CAPABILITY=${ATEN_CPU_CAPABILITY:-<unset>}"
} | tee "${OUT_DIR}/machine.txt"

# ours NAME SHAPE BLAS INTRA [extra env...]: one deepnet_bench_train process.
ours() {
  local name="$1" shape="$2" blas="$3" intra="$4"
  shift 4
  echo "+ ${name}: deepnet_bench_train --shape ${shape} --blas-threads ${blas} --intra-threads ${intra}" >&2
  env "$@" "${BENCH}" --shape "${shape}" --blas-threads "${blas}" --intra-threads "${intra}" \
    --steps "$(steps_for "${shape}")" --warmup-steps "${WARMUP}" --runs "${RUNS}" --json \
    > "${OUT_DIR}/${name}.json"
}
# reference NAME SHAPE THREADS [extra env...]: one bench/reference_deepnet.py process.
reference() {
  local name="$1" shape="$2" threads="$3"
  shift 3
  echo "+ ${name}: reference_deepnet.py --shape ${shape} --threads ${threads}" >&2
  env "$@" "${PYTHON_TORCH}" "${REFERENCE}" --shape "${shape}" --threads "${threads}" \
    --steps "$(steps_for "${shape}")" --warmup-steps "${WARMUP}" --runs "${RUNS}" --json \
    > "${OUT_DIR}/${name}.json"
}

for shape in 6x6-d512 100x100-d64; do
  # One thread: OpenBLAS and LibTorch's intra-op pool both at 1.
  ours "ours-${shape}-1thread" "${shape}" 1 1 OPENBLAS_NUM_THREADS=1
  # Defaults: the trainer's (OpenBLAS one thread per core, one intra-op thread).
  ours "ours-${shape}-default" "${shape}" 0 1
  if [[ "${have_reference}" == 1 ]]; then
    reference "ref-${shape}-1thread" "${shape}" 1 OPENBLAS_NUM_THREADS=1
    # PyTorch's defaults: OpenBLAS and intra-op pools one thread per core each.
    reference "ref-${shape}-default" "${shape}" "${CORES}"
  fi
done

if [[ "${SKIP_THREADS:-0}" != 1 && "${CORES}" -ge 2 ]]; then
  # More thread configurations (BLAS threads / intra-op threads) for 6L-6L d=512; 1/1 and
  # ${CORES}/1 (the default) were measured above.
  for config in 1/2 2/2; do
    ours "threads-6x6-d512-${config/\//-}" 6x6-d512 "${config%/*}" "${config#*/}"
  done
fi

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "${OUT_DIR}/machine.txt"
echo "results: ${OUT_DIR}" >&2
"${PYTHON_TORCH}" - "${OUT_DIR}" <<'EOF'
import glob, json, os, sys

out_dir = sys.argv[1]
results = {}
for path in glob.glob(os.path.join(out_dir, "*.json")):
    with open(path) as f:
        results[os.path.basename(path)[:-5]] = json.load(f)

# The brief's PyTorch-eager figures, one thread, on this machine (tokens/s).
QUOTED = {"6x6-d512": 600.0, "100x100-d64": 1100.0}
TARGET = {"6x6-d512": 1.1, "100x100-d64": 2.0}

def fmt(x, spec, suffix=""):
    return "-" if x is None else format(x, spec) + suffix

def ratio(a, b):
    return a / b if a is not None and b else None

print()
print("Wall clock (medians):")
print()
print("| shape | threads (BLAS/intra) | tokens/s | target tok/s | GFLOP/s | matmul GFLOP/s "
      "| vs matmul | PyTorch ref tok/s | vs ref | vs quoted ref (target) | CPU/wall |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for shape in ("6x6-d512", "100x100-d64"):
    for mode in ("1thread", "default"):
        r = results.get("ours-%s-%s" % (shape, mode))
        if r is None:
            continue
        m = r["median"]
        ref = results.get("ref-%s-%s" % (shape, mode))
        ref_tok = ref["median"]["tokens_per_s"] if ref else None
        quoted = ratio(m["tokens_per_s"], QUOTED[shape]) if mode == "1thread" else None
        threads = "%d/%d" % (r["threads"]["blas_threads"], r["threads"]["intra_op_threads"])
        print("| %s | %s | %.0f | %.0f | %.1f | %.1f | %.2f | %s | %s | %s | %.2f |" % (
            shape, threads, m["tokens_per_s"], m["target_tokens_per_s"], m["gflops"],
            m["matmul_gflops"], m["ratio_to_matmul"], fmt(ref_tok, ".0f"),
            fmt(ratio(m["tokens_per_s"], ref_tok), ".2f", "x"),
            fmt(quoted, ".2f", "x (%.1fx)" % TARGET[shape]), m["cpu_s_per_wall_s"]))

print()
print("One thread, per second of process CPU time (medians; robust to other jobs on the machine):")
print()
print("| shape | tokens/s | GFLOP/s | matmul GFLOP/s | vs matmul | PyTorch ref tok/s | vs ref "
      "| vs quoted ref (target) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for shape in ("6x6-d512", "100x100-d64"):
    r = results.get("ours-%s-1thread" % shape)
    if r is None:
        continue
    m = r["median"]
    ref = results.get("ref-%s-1thread" % shape)
    ref_tok = ref["median"]["tokens_per_cpu_s"] if ref else None
    print("| %s | %.0f | %.1f | %.1f | %.2f | %s | %s | %s |" % (
        shape, m["tokens_per_cpu_s"], m["gflops_per_cpu_s"], m["matmul_gflops_per_cpu_s"],
        m["ratio_to_matmul_cpu"], fmt(ref_tok, ".0f"),
        fmt(ratio(m["tokens_per_cpu_s"], ref_tok), ".2f", "x"),
        fmt(ratio(m["tokens_per_cpu_s"], QUOTED[shape]), ".2f", "x (%.1fx)" % TARGET[shape])))

threads = [results[k] for k in sorted(results)
           if k.startswith("threads-") or k in ("ours-6x6-d512-1thread", "ours-6x6-d512-default")]
if len(threads) > 2:
    print()
    print("| 6x6-d512 threads (BLAS/intra) | s/step | tokens/s | GFLOP/s | matmul GFLOP/s | vs matmul |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in sorted(threads, key=lambda r: (r["threads"]["intra_op_threads"],
                                            r["threads"]["blas_threads"])):
        m = r["median"]
        print("| %d/%d | %.3f | %.0f | %.1f | %.1f | %.2f |" % (
            r["threads"]["blas_threads"], r["threads"]["intra_op_threads"], m["step_s"],
            m["tokens_per_s"], m["gflops"], m["matmul_gflops"], m["ratio_to_matmul"]))

any_r = next((r for k, r in sorted(results.items()) if k.startswith("ours-")), None)
if any_r:
    print()
    print("OpenBLAS core: %s; %s; ATen CPU capability: %s" % (
        any_r["openblas_corename"], any_r.get("openblas_config", "?"),
        any_r.get("aten_cpu_capability", "?")))
EOF
