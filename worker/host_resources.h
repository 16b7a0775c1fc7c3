#pragma once
// What the worker daemon tells the coordinator about its machine, found without LibTorch or
// the CUDA runtime. Torch-free.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::worker {

struct HostFacts {
  std::string hostname;
  // Address peers reach this machine at (Gloo/NCCL sockets).
  std::string address;
  int cpu_count = 0;
  // Physical memory; 0 when unknown.
  int64_t memory_bytes = 0;
  // One per visible GPU in CUDA ordinal (PCI bus) order.
  std::vector<std::string> gpu_names;
  // deepnet-worker version (with the git revision when known).
  std::string version;
  // LibTorch version the trainer of this build links.
  std::string torch_version;
  // Where SlotInfo::memory_bytes came from (AssignSlotMemory): "flag", "gpu", "host" or
  // "unknown".
  std::string slot_memory_source = "unknown";
};

// One place a rank can run.
struct SlotInfo {
  int index = 0;
  bool cuda = false;
  // CUDA ordinal of a CUDA slot; -1 for a CPU slot.
  int device_index = -1;
  // Memory one rank may use here, in bytes (AssignSlotMemory); 0: unknown.
  int64_t memory_bytes = 0;
  // The trainer's CUDA_VISIBLE_DEVICES (AssignTrainerDevices): the one entry naming this slot's
  // GPU, so that the trainer sees it alone, as cuda:0. "" for a CPU slot.
  std::string cuda_visible_devices = "";
};

// GPU model names from `proc_dir`/<pci bus id>/information ("Model: ..." lines, the NVIDIA
// driver's procfs), sorted by bus id, which is the CUDA ordinal order with
// CUDA_DEVICE_ORDER=PCI_BUS_ID. When `cuda_visible_devices` is set (the worker's
// CUDA_VISIBLE_DEVICES) only the listed ordinals remain, in its order; "" hides all; a list
// with UUIDs or names is ignored (all GPUs stay). Empty when the folder does not exist.
std::vector<std::string> DetectGpus(const std::string& proc_dir,
                                    const std::optional<std::string>& cuda_visible_devices);

// The PCI bus ids of the GPUs DetectGpus lists, in the same order (folder names under
// `proc_dir`, filtered by `cuda_visible_devices` the same way).
std::vector<std::string> DetectGpuBusIds(const std::string& proc_dir,
                                         const std::optional<std::string>& cuda_visible_devices);

// Total memory of each GPU, by PCI bus id, from NVML (libnvidia-ml.so.1, loaded at run time:
// the daemon links no CUDA library); 0 for a GPU NVML does not answer for, all 0 without NVML.
std::vector<int64_t> GpuMemoryBytes(const std::vector<std::string>& bus_ids);

// The memory limit of this process's cgroup (v2 memory.max, v1 memory.limit_in_bytes), read
// from `self_cgroup` (/proc/self/cgroup) under `cgroup_root` (/sys/fs/cgroup); 0 when there is
// none. A worker in a container with a memory limit shares that, not the machine's memory.
int64_t CgroupMemoryLimit(const std::string& self_cgroup, const std::string& cgroup_root);

// Sets every slot's memory_bytes and returns where it came from: `override_bytes` (> 0; the
// --slot-memory-bytes flag) for every slot, "flag"; else CUDA slots get their GPU's memory from
// `gpu_memory` ([device_index]; "gpu", or "unknown" when a GPU's is 0), CPU slots an equal share
// of `host_memory` ("host"; "unknown" when it is 0).
std::string AssignSlotMemory(std::vector<SlotInfo>* slots, int64_t override_bytes,
                             int64_t host_memory, const std::vector<int64_t>& gpu_memory);

// Hostname, CPU count and memory of this machine, plus the given GPUs, version strings and
// address ("" becomes the address the hostname resolves to, else the hostname).
HostFacts DetectHostFacts(const std::string& advertise_address, std::vector<std::string> gpu_names,
                          const std::string& version, const std::string& torch_version);

// The CUDA_VISIBLE_DEVICES value that shows a trainer only the GPU this daemon calls CUDA
// ordinal `device_index`: the ordinal itself when the daemon's own `cuda_visible_devices` is
// unset, else that list's entry number `device_index` (an ordinal or a GPU-/MIG- UUID, passed on
// as written; entries are comma-separated, blanks trimmed, CUDA's rule). InvalidArgument naming
// CUDA_VISIBLE_DEVICES when the list has no such entry.
[[nodiscard]] absl::StatusOr<std::string> TrainerVisibleDevices(
    const std::optional<std::string>& cuda_visible_devices, int device_index);

// Sets cuda_visible_devices of every CUDA slot from its device_index (TrainerVisibleDevices).
[[nodiscard]] absl::Status AssignTrainerDevices(
    std::vector<SlotInfo>* slots, const std::optional<std::string>& cuda_visible_devices);

// The slots of a worker: `requested` (0: the default) CUDA slots 0..requested-1 on a machine
// with GPUs (default: one per GPU), else `requested` CPU slots (default 1). InvalidArgument
// naming --slots when requested < 0 or exceeds the GPUs.
[[nodiscard]] absl::StatusOr<std::vector<SlotInfo>> PlanSlots(int requested, int gpu_count);

}  // namespace deepnet::worker
