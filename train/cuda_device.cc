#include "train/cuda_device.h"

#include <c10/core/Device.h>
#include <torch/cuda.h>

#ifdef DEEPNET_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace deepnet::train {

absl::StatusOr<RankDevice> PinRankDevice(const job::Device& configured,
                                         const comm::LaunchEnv& env) {
  RankDevice out;
  out.device = configured;
  if (!configured.is_cuda()) return out;
  if (!configured.index) {
    absl::StatusOr<int> index =
        comm::SelectCudaDevice(env, static_cast<int>(torch::cuda::device_count()));
    if (!index.ok()) return index.status();
    out.cuda_index = *index;
    out.device.index = *index;
  } else {
    out.cuda_index = *configured.index;
  }
#ifdef DEEPNET_HAVE_CUDA
  if (out.cuda_index < static_cast<int>(torch::cuda::device_count())) {
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(out.cuda_index));
  }
#endif
  return out;
}

GpuMemory CudaMemory(int index) {
  GpuMemory memory;
#ifdef DEEPNET_HAVE_CUDA
  if (index < 0 || index >= static_cast<int>(torch::cuda::device_count())) return memory;
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  // StatType::AGGREGATE is entry 0 in every version (its namespace moved in LibTorch 2.5).
  constexpr size_t kAggregate = 0;
  memory.allocated = stats.allocated_bytes[kAggregate].current;
  memory.reserved = stats.reserved_bytes[kAggregate].current;
  memory.peak_allocated = stats.allocated_bytes[kAggregate].peak;
#else
  (void)index;
#endif
  return memory;
}

}  // namespace deepnet::train
