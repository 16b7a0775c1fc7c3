#include "train/runtime_threads.h"

#include <dlfcn.h>
#include <malloc.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>
#include <thread>

#include <unistd.h>

namespace deepnet::train {

ThreadSettings ConfigureThreads(int64_t blas_threads, int64_t intra_op_threads) {
  ThreadSettings settings;
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t blas = blas_threads > 0 ? blas_threads : cores;
  using SetThreads = void (*)(int);
  using GetThreads = int (*)();
  auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (set != nullptr) {
    set(static_cast<int>(blas));
    settings.blas_library = "openblas";
    settings.blas_threads = get != nullptr ? get() : blas;
  } else {
    settings.blas_library = "unknown";
  }
  torch::set_num_threads(static_cast<int>(std::max<int64_t>(1, intra_op_threads)));
  settings.intra_op_threads = torch::get_num_threads();
  return settings;
}

bool KeepFreedMemoryForReuse() {
  if (const char* flag = std::getenv("DEEPNET_MALLOC_TUNING"); flag != nullptr && std::string(flag) == "0") {
    return false;
  }
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trim_set = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
  return mmap_set && trim_set;
}

}  // namespace deepnet::train

namespace deepnet::train {

void ReexecWithFasterOpenBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  if (const char* flag = std::getenv("DEEPNET_OPENBLAS_AUTO"); flag != nullptr && std::string(flag) == "0") {
    return;
  }
  using CoreName = char* (*)();
  auto core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (core_name == nullptr) return;
  const std::string core = core_name();
  if (core != "Prescott" && core != "Core2" && core != "Katmai" && core != "Northwood") return;
  __builtin_cpu_init();
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    better = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    better = "Haswell";
  }
  if (better == nullptr) return;
  setenv("OPENBLAS_CORETYPE", better, /*overwrite=*/1);
  execv("/proc/self/exe", argv);  // Returns only on failure: carry on with the generic kernels.
}

}  // namespace deepnet::train
