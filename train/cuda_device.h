#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "comm/launch_env.h"
#include "job/job_choices.h"

namespace deepnet::train {

/// The device one rank trains on.
struct RankDevice {
  job::Device device;   // runtime.device resolved: cpu or cuda:N.
  int cuda_index = -1;  // N for a CUDA device, else -1.
};

/// Resolves runtime.device for this rank and, for a CUDA device, makes it the current one
/// (c10::cuda::set_device) so that nothing later creates a context on another GPU. Call it
/// before anything else touches CUDA, and use the result for tensors and the communicator alike.
/// "cuda" becomes "cuda:N" with N = comm::SelectCudaDevice(env, visible devices); "cuda:K" stays;
/// cpu is returned as it is. InvalidArgument when "cuda" finds no device.
[[nodiscard]] absl::StatusOr<RankDevice> PinRankDevice(const job::Device& configured,
                                                       const comm::LaunchEnv& env);

/// The CUDA caching allocator's view of one device, in bytes: what tensors hold now, what it
/// holds from the driver now, and the most tensors held since the process started.
struct GpuMemory {
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t peak_allocated = 0;
};

/// GpuMemory of CUDA device `index`; all 0 in a build without CUDA, for index < 0, or when no
/// CUDA device is available.
GpuMemory CudaMemory(int index);

}  // namespace deepnet::train
