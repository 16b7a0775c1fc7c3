#pragma once

// The trainer's own memory admission: before it builds the model, `deepnet train` compares the
// estimate of job/memory_estimate.h with the memory this rank may use, and exits with a clear
// message instead of growing until the kernel or the allocator kills it.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "job/memory_estimate.h"

namespace deepnet::train {

/// Memory one rank may use; bytes 0 means unknown (nothing is checked).
struct MemoryBudget {
  int64_t bytes = 0;
  // What bounded it: "DEEPNET_SLOT_MEMORY_BYTES", "MemAvailable / 4 ranks", "cgroup memory.max".
  std::string source;
};

/// Where the budget is read from; tests point these at fake files.
struct MemorySources {
  std::string meminfo = "/proc/meminfo";
  std::string self_cgroup = "/proc/self/cgroup";
  std::string cgroup_root = "/sys/fs/cgroup";
  // The worker daemon's slot memory (DEEPNET_SLOT_MEMORY_BYTES); empty when unset.
  std::string slot_memory;
};
MemorySources DefaultMemorySources();  // slot_memory from the environment

/// The smallest of: the slot memory the worker gave (any device); for the CPU, MemAvailable
/// divided among the `ranks_on_host` ranks of this machine and the free room under this
/// process's cgroup (v2 memory.max - memory.current, or v1 memory.limit_in_bytes - usage).
/// For CUDA only the slot memory is known (the daemon reads the GPU's memory through NVML).
MemoryBudget AvailableMemory(bool cuda, int ranks_on_host, const MemorySources& sources);

/// OK when the budget is unknown or holds the estimate; FAILED_PRECONDITION otherwise, naming
/// the estimate, its biggest part, the budget and its source, and what to change.
absl::Status CheckMemory(const job::MemoryEstimate& estimate, const MemoryBudget& budget);

}  // namespace deepnet::train
