#include "train/memory_check.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace deepnet::train {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A whole-number file such as memory.max; 0 for "max", absent or unreadable.
int64_t ReadNumber(const std::string& path) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(ReadFirstLine(path), &value) || value < 0) return 0;
  return value;
}

// "MemAvailable:   123456 kB" -> bytes; 0 when absent.
int64_t MemAvailable(const std::string& meminfo) {
  std::ifstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "MemAvailable:")) continue;
    std::istringstream fields{std::string(rest)};
    int64_t kib = 0;
    fields >> kib;
    return kib > 0 && kib < INT64_MAX / 1024 ? kib * 1024 : 0;
  }
  return 0;
}

// Free room under this process's cgroup limit; 0 when there is none or it is unknown.
int64_t CgroupRoom(const MemorySources& s) {
  std::ifstream in(s.self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    // v2: "0::/path"; v1: "N:memory:/path".
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    int64_t limit = 0, usage = 0;
    if (controllers.empty()) {
      limit = ReadNumber(s.cgroup_root + path + "/memory.max");
      usage = ReadNumber(s.cgroup_root + path + "/memory.current");
    } else if (controllers.find("memory") != std::string::npos) {
      limit = ReadNumber(s.cgroup_root + "/memory" + path + "/memory.limit_in_bytes");
      usage = ReadNumber(s.cgroup_root + "/memory" + path + "/memory.usage_in_bytes");
      if (limit >= (int64_t{1} << 60)) limit = 0;  // v1 "no limit" is a huge number
    }
    if (limit > 0) return std::max<int64_t>(limit - usage, 1);
  }
  return 0;
}

void TakeSmaller(MemoryBudget* budget, int64_t bytes, std::string source) {
  if (bytes <= 0) return;
  if (budget->bytes == 0 || bytes < budget->bytes) {
    budget->bytes = bytes;
    budget->source = std::move(source);
  }
}

}  // namespace

MemorySources DefaultMemorySources() {
  MemorySources sources;
  if (const char* slot = std::getenv("DEEPNET_SLOT_MEMORY_BYTES")) sources.slot_memory = slot;
  return sources;
}

MemoryBudget AvailableMemory(bool cuda, int ranks_on_host, const MemorySources& sources) {
  MemoryBudget budget;
  int64_t slot = 0;
  if (absl::SimpleAtoi(sources.slot_memory, &slot)) {
    TakeSmaller(&budget, slot, "the worker's slot memory (DEEPNET_SLOT_MEMORY_BYTES)");
  }
  if (cuda) return budget;
  const int ranks = std::max(ranks_on_host, 1);
  TakeSmaller(&budget, MemAvailable(sources.meminfo) / ranks,
              ranks == 1 ? std::string("MemAvailable in ") + sources.meminfo
                         : absl::StrCat("MemAvailable in ", sources.meminfo, " / ", ranks,
                                        " ranks on this host"));
  TakeSmaller(&budget, CgroupRoom(sources) / ranks,
              "the free room under this cgroup's memory limit");
  return budget;
}

absl::Status CheckMemory(const job::MemoryEstimate& estimate, const MemoryBudget& budget) {
  if (budget.bytes <= 0 || estimate.largest.total_bytes <= budget.bytes) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "not enough memory: this model needs an estimated ",
      job::FormatBytes(estimate.largest.total_bytes), " per rank, but ",
      job::FormatBytes(budget.bytes), " is available (", budget.source, "); the biggest part is ",
      estimate.biggest_part(), ". Estimate: ", estimate.Summary(),
      ". Nothing was allocated. Use more pipeline stages, fewer tokens per batch "
      "(data.max_tokens) or a smaller model; `deepnet inspect --config` shows the breakdown"));
}

}  // namespace deepnet::train
