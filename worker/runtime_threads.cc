#include "worker/runtime_threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <thread>

namespace deepnet::worker {

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

}  // namespace deepnet::worker
