#pragma once

#include <cstdint>
#include <string>

namespace deepnet::train {

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

/// Makes glibc keep freed memory for reuse instead of returning it to the kernel. A training step
/// allocates and frees the same activation buffers every step. By default glibc serves blocks of
/// 128 KiB and more with mmap and gives them back on free. Each step then faults in and zeroes
/// fresh pages: about 5 % of a 100L-100L d=64 step here (docs/PERFORMANCE.md). This call sets
/// the mmap threshold to glibc's maximum (32 MiB) and the trim threshold to 1 GiB.
/// DEEPNET_MALLOC_TUNING=0 leaves glibc's defaults. Returns whether the settings were applied.
bool KeepFreedMemoryForReuse();

}  // namespace deepnet::train

namespace deepnet::train {

/// OpenBLAS 0.3.21's DYNAMIC_ARCH does not recognise recent Xeons (this KVM guest's family 6
/// model 207) and falls back to its generic Prescott kernels, 2-3.5x slower than SkylakeX here
/// (docs/PERFORMANCE.md). It picks the kernels when the library loads, so the only remedy inside
/// a process is to set OPENBLAS_CORETYPE and re-execute once. Call first thing in main():
/// when OPENBLAS_CORETYPE is unset, OpenBLAS chose a generic core and the CPU has AVX-512
/// (SkylakeX) or AVX2 (Haswell), this execs /proc/self/exe with the variable set; otherwise,
/// or if exec fails, it returns and the process continues as it is. DEEPNET_OPENBLAS_AUTO=0
/// disables it.
void ReexecWithFasterOpenBlasKernels(char** argv);

}  // namespace deepnet::train
