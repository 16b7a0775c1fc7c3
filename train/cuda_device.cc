#include "train/cuda_device.h"

#include <c10/core/Device.h>
#include <torch/cuda.h>

#ifdef DEEPNET_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace deepnet::train {

absl::StatusOr<RankDevice> PinRankDevice(const std::string& configured,
                                         const comm::LaunchEnv& env) {
  RankDevice out;
  out.device = configured;
  if (configured.rfind("cuda", 0) != 0) return out;
  if (configured == "cuda") {
    absl::StatusOr<int> index =
        comm::SelectCudaDevice(env, static_cast<int>(torch::cuda::device_count()));
    if (!index.ok()) return index.status();
    out.cuda_index = *index;
    out.device = "cuda:" + std::to_string(*index);
  } else {
    out.cuda_index = c10::Device(configured).index();
    if (out.cuda_index < 0) out.cuda_index = 0;
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
