#!/usr/bin/env bash
# On a machine with a GPU and PyTorch 2.x (CUDA): compiles deepnet_model (model/) and
# bench/gpu_model_probe.cc against the LibTorch inside the Python package, without CMake or any
# other dependency, and runs the probe: CPU-vs-CUDA loss and gradient agreement, then fp32 and
# pure-bf16 training-step speed of 6L-6L and 18L-18L d=1024 (docs/PERFORMANCE.md, "First CUDA
# run"). A stop-gap until issue 14's scripts/gpu_check.sh builds the whole trainer side there.
#   bash bench/gpu_model_probe.sh            (from the repository root; log also in $OUT/log)
OUT=${OUT:-/tmp}
exec > >(tee "$OUT/log") 2>&1
set -x
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c 'import torch;print(torch.__version__, torch.version.cuda, torch.compiled_with_cxx11_abi())'
TORCH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
ABI=$(python3 -c 'import torch;print(int(torch.compiled_with_cxx11_abi()))')
g++ --version | head -1
rm -rf /tmp/o; mkdir -p /tmp/o
set +x
compile() {  # std file
  local o=/tmp/o/$(echo "$2" | tr /. __).o
  if ! g++ -std=$1 -O2 -fPIC -D_GLIBCXX_USE_CXX11_ABI=$ABI -I. -I$TORCH/include \
      -I$TORCH/include/torch/csrc/api/include -c "$2" -o "$o" 2> "$o.err"; then
    echo "COMPILE FAILED ($1) $2:"; grep -m 12 "error" "$o.err"; return 1
  fi
}
export -f compile; export TORCH ABI
start=$(date +%s)
ls model/*.cc model/kernels/*.cc bench/gpu_model_probe.cc | xargs -P16 -I{} bash -c 'compile c++17 {}' && echo "ALL COMPILED c++17 in $(( $(date +%s) - start )) s" || {
  echo "retrying failures with c++20"
  ls model/*.cc model/kernels/*.cc bench/gpu_model_probe.cc | xargs -P16 -I{} bash -c 'compile c++20 {}' && echo "ALL COMPILED c++20"; }
g++ /tmp/o/*.o -o /tmp/probe -L$TORCH/lib -ltorch -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda \
  -Wl,-rpath,$TORCH/lib -Wl,--no-as-needed -ltorch_cuda -Wl,--as-needed && echo LINKED
timeout 240 /tmp/probe; echo "probe rc=$?"
