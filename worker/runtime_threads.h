#pragma once

#include <cstdint>
#include <string>

namespace deepnet::worker {

/// Thread pools in effect after ConfigureThreads.
struct ThreadSettings {
  int64_t blas_threads = 0;      // 0 when OpenBLAS was not found in the process.
  int64_t intra_op_threads = 1;  // LibTorch intra-op pool.
  std::string blas_library;      // "openblas" or "unknown".
};

/// Sets OpenBLAS's own pool (blas_threads, 0 = one per core) and LibTorch's intra-op pool.
/// OpenBLAS keeps a pool of its own; oversubscribing cores with both pools was measured 3-10x
/// slower here, hence the default of one intra-op thread (docs/PERFORMANCE.md).
/// OpenBLAS is reached through dlsym, so the binary does not link it directly.
ThreadSettings ConfigureThreads(int64_t blas_threads, int64_t intra_op_threads);

}  // namespace deepnet::worker
