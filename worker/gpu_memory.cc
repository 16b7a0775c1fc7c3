// GPU memory from NVML, loaded at run time so that the daemon links no CUDA library and runs on
// machines without a driver (host_resources.h: GpuMemoryBytes).
#include <dlfcn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "worker/host_resources.h"

namespace deepnet::worker {
namespace {

// The few NVML declarations used (nvml.h, stable C ABI since CUDA 5).
using NvmlReturn = int;  // NVML_SUCCESS = 0
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

class Nvml {
 public:
  Nvml() {
    handle_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) return;
    init_ = reinterpret_cast<NvmlReturn (*)()>(dlsym(handle_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<NvmlReturn (*)()>(dlsym(handle_, "nvmlShutdown"));
    by_bus_id_ = reinterpret_cast<NvmlReturn (*)(const char*, NvmlDevice*)>(
        dlsym(handle_, "nvmlDeviceGetHandleByPciBusId_v2"));
    memory_ = reinterpret_cast<NvmlReturn (*)(NvmlDevice, NvmlMemory*)>(
        dlsym(handle_, "nvmlDeviceGetMemoryInfo"));
    ready_ = init_ != nullptr && shutdown_ != nullptr && by_bus_id_ != nullptr &&
             memory_ != nullptr && init_() == 0;
  }
  ~Nvml() {
    if (ready_) shutdown_();
    if (handle_ != nullptr) dlclose(handle_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Total bytes of the GPU at `bus_id`; 0 when unknown.
  int64_t TotalBytes(const std::string& bus_id) const {
    if (!ready_) return 0;
    NvmlDevice device = nullptr;
    NvmlMemory memory{};
    if (by_bus_id_(bus_id.c_str(), &device) != 0 || memory_(device, &memory) != 0) return 0;
    return memory.total > static_cast<unsigned long long>(INT64_MAX)
               ? INT64_MAX
               : static_cast<int64_t>(memory.total);
  }

 private:
  void* handle_ = nullptr;
  bool ready_ = false;
  NvmlReturn (*init_)() = nullptr;
  NvmlReturn (*shutdown_)() = nullptr;
  NvmlReturn (*by_bus_id_)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*memory_)(NvmlDevice, NvmlMemory*) = nullptr;
};

}  // namespace

std::vector<int64_t> GpuMemoryBytes(const std::vector<std::string>& bus_ids) {
  std::vector<int64_t> bytes(bus_ids.size(), 0);
  if (bus_ids.empty()) return bytes;
  const Nvml nvml;
  for (size_t i = 0; i < bus_ids.size(); ++i) bytes[i] = nvml.TotalBytes(bus_ids[i]);
  return bytes;
}

}  // namespace deepnet::worker
