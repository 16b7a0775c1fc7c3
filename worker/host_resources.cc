#include "worker/host_resources.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace deepnet::worker {
namespace {

std::string ModelOf(const std::filesystem::path& information) {
  std::ifstream in(information);
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "Model:")) continue;
    return std::string(absl::StripAsciiWhitespace(line.substr(6)));
  }
  return "NVIDIA GPU";  // The driver lists the device but not its model.
}

// The first address `host` resolves to (IPv4 preferred), or "" when it does not resolve.
std::string Resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return "";
  std::string best;
  for (addrinfo* a = result; a != nullptr; a = a->ai_next) {
    char text[NI_MAXHOST];
    if (getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof(text), nullptr, 0, NI_NUMERICHOST) !=
        0) {
      continue;
    }
    if (a->ai_family == AF_INET) {
      best = text;
      break;
    }
    if (best.empty()) best = text;
  }
  freeaddrinfo(result);
  return best;
}

int64_t MemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
}

}  // namespace

namespace {

// The GPU folders under `proc_dir` (named by PCI bus id), in bus order, as CUDA_VISIBLE_DEVICES
// leaves them.
std::vector<std::filesystem::path> VisibleGpuFolders(
    const std::string& proc_dir, const std::optional<std::string>& cuda_visible_devices) {
  std::error_code ec;
  std::vector<std::filesystem::path> devices;
  for (const auto& entry : std::filesystem::directory_iterator(proc_dir, ec)) {
    if (entry.is_directory(ec)) devices.push_back(entry.path());
  }
  std::sort(devices.begin(), devices.end());  // PCI bus ids sort in bus order.
  std::vector<std::filesystem::path> names = devices;
  if (!cuda_visible_devices) return names;
  std::vector<std::filesystem::path> visible;
  for (absl::string_view item : absl::StrSplit(*cuda_visible_devices, ',', absl::SkipEmpty())) {
    int ordinal = 0;
    if (!absl::SimpleAtoi(item, &ordinal)) return names;  // UUIDs: leave the mapping to CUDA.
    // CUDA stops at the first invalid ordinal.
    if (ordinal < 0 || ordinal >= static_cast<int>(names.size())) break;
    visible.push_back(names[ordinal]);
  }
  return visible;
}

}  // namespace

std::vector<std::string> DetectGpus(const std::string& proc_dir,
                                    const std::optional<std::string>& cuda_visible_devices) {
  std::vector<std::string> names;
  for (const auto& device : VisibleGpuFolders(proc_dir, cuda_visible_devices)) {
    names.push_back(ModelOf(device / "information"));
  }
  return names;
}

std::vector<std::string> DetectGpuBusIds(const std::string& proc_dir,
                                         const std::optional<std::string>& cuda_visible_devices) {
  std::vector<std::string> ids;
  for (const auto& device : VisibleGpuFolders(proc_dir, cuda_visible_devices)) {
    ids.push_back(device.filename().string());
  }
  return ids;
}

int64_t CgroupMemoryLimit(const std::string& self_cgroup, const std::string& cgroup_root) {
  std::ifstream in(self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    // v2: "0::/path"; v1: "N:memory,...:/path".
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    std::string file;
    if (controllers.empty()) {
      file = cgroup_root + path + "/memory.max";
    } else if (absl::StrContains(controllers, "memory")) {
      file = cgroup_root + "/memory" + path + "/memory.limit_in_bytes";
    } else {
      continue;
    }
    std::ifstream limit_in(file);
    std::string text;
    int64_t limit = 0;
    if (std::getline(limit_in, text) && absl::SimpleAtoi(text, &limit) && limit > 0 &&
        limit < (int64_t{1} << 60)) {  // v1 writes a huge number for "no limit"
      return limit;
    }
  }
  return 0;
}

std::string AssignSlotMemory(std::vector<SlotInfo>* slots, int64_t override_bytes,
                             int64_t host_memory, const std::vector<int64_t>& gpu_memory) {
  if (override_bytes > 0) {
    for (SlotInfo& slot : *slots) slot.memory_bytes = override_bytes;
    return "flag";
  }
  int64_t cpu_slots = 0;
  for (const SlotInfo& slot : *slots) cpu_slots += slot.cuda ? 0 : 1;
  bool all_known = true;
  for (SlotInfo& slot : *slots) {
    if (slot.cuda) {
      const bool listed =
          slot.device_index >= 0 && slot.device_index < static_cast<int>(gpu_memory.size());
      slot.memory_bytes = listed ? gpu_memory[static_cast<size_t>(slot.device_index)] : 0;
    } else {
      slot.memory_bytes = std::max<int64_t>(host_memory, 0) / cpu_slots;
    }
    if (slot.memory_bytes <= 0) all_known = false;
  }
  if (!all_known) return "unknown";
  return cpu_slots > 0 ? "host" : "gpu";
}

HostFacts DetectHostFacts(const std::string& advertise_address, std::vector<std::string> gpu_names,
                          const std::string& version, const std::string& torch_version) {
  HostFacts facts;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) facts.hostname = name;
  facts.address = advertise_address;
  if (facts.address.empty()) facts.address = Resolve(facts.hostname);
  if (facts.address.empty()) facts.address = facts.hostname;
  facts.cpu_count = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  facts.memory_bytes = MemoryBytes();
  facts.gpu_names = std::move(gpu_names);
  facts.version = version;
  facts.torch_version = torch_version;
  return facts;
}

absl::StatusOr<std::string> TrainerVisibleDevices(
    const std::optional<std::string>& cuda_visible_devices, int device_index) {
  if (device_index < 0) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA device index ", device_index, " < 0"));
  }
  if (!cuda_visible_devices) return std::to_string(device_index);
  std::vector<std::string> entries;
  for (absl::string_view item : absl::StrSplit(*cuda_visible_devices, ',')) {
    entries.emplace_back(absl::StripAsciiWhitespace(item));
  }
  if (entries.size() == 1 && entries[0].empty()) entries.clear();  // "" hides every GPU.
  if (device_index >= static_cast<int>(entries.size()) ||
      entries[static_cast<size_t>(device_index)].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA_VISIBLE_DEVICES=\"", *cuda_visible_devices, "\" has no entry ",
                     device_index, " for the slot on CUDA device ", device_index, " (it lists ",
                     entries.size(), "); set --slots to at most that many"));
  }
  return entries[static_cast<size_t>(device_index)];
}

absl::Status AssignTrainerDevices(std::vector<SlotInfo>* slots,
                                  const std::optional<std::string>& cuda_visible_devices) {
  for (SlotInfo& slot : *slots) {
    if (!slot.cuda) continue;
    absl::StatusOr<std::string> visible =
        TrainerVisibleDevices(cuda_visible_devices, slot.device_index);
    if (!visible.ok()) return visible.status();
    slot.cuda_visible_devices = *std::move(visible);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SlotInfo>> PlanSlots(int requested, int gpu_count) {
  if (requested < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--slots: ", requested, " is negative"));
  }
  if (gpu_count > 0 && requested > gpu_count) {
    return absl::InvalidArgumentError(absl::StrCat("--slots: ", requested,
                                                   " slots but this machine has ", gpu_count,
                                                   " GPU(s), one per slot"));
  }
  const int count = requested > 0 ? requested : std::max(gpu_count, 1);
  std::vector<SlotInfo> slots;
  for (int i = 0; i < count; ++i) {
    SlotInfo slot;
    slot.index = i;
    slot.cuda = gpu_count > 0;
    slot.device_index = slot.cuda ? i : -1;
    slots.push_back(slot);
  }
  return slots;
}

}  // namespace deepnet::worker
