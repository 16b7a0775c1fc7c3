#include "ctl/worker_table.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctl/format.h"
#include "ctl/output.h"

namespace deepnet::ctl {

std::string DeviceSummary(const v1::Worker& worker) {
  // Kind (with GPU name) -> slots, in the order first seen.
  std::vector<std::pair<std::string, int>> groups;
  for (const v1::SlotStatus& slot : worker.slots()) {
    std::string kind = DeviceName(slot.kind());
    if (kind.empty()) kind = "unknown";
    if (!slot.device_name().empty()) absl::StrAppend(&kind, " (", slot.device_name(), ")");
    auto it = groups.begin();
    while (it != groups.end() && it->first != kind) ++it;
    if (it == groups.end()) {
      groups.emplace_back(kind, 1);
    } else {
      ++it->second;
    }
  }
  if (groups.empty()) return "-";
  std::vector<std::string> parts;
  for (const auto& [kind, n] : groups) {
    const size_t paren = kind.find(" (");
    parts.push_back(paren == std::string::npos
                        ? absl::StrCat(kind, " x", n)
                        : absl::StrCat(kind.substr(0, paren), " x", n, kind.substr(paren)));
  }
  return absl::StrJoin(parts, ", ");
}

std::string JobSummary(const v1::Worker& worker) {
  std::map<std::string, std::vector<int>> ranks;  // job id -> ranks, in slot order
  std::vector<std::string> order;
  int hidden = 0;
  for (const v1::SlotStatus& slot : worker.slots()) {
    if (!slot.used()) continue;
    if (!slot.has_task()) {
      ++hidden;
      continue;
    }
    auto [it, inserted] = ranks.try_emplace(slot.task().job_id());
    if (inserted) order.push_back(slot.task().job_id());
    it->second.push_back(slot.task().rank());
  }
  std::vector<std::string> parts;
  for (const std::string& job : order) {
    const std::vector<int>& r = ranks[job];
    parts.push_back(absl::StrCat(job, " (rank", r.size() == 1 ? " " : "s ", absl::StrJoin(r, ","),
                                 ")"));
  }
  if (hidden > 0) parts.push_back(absl::StrCat(hidden, " hidden"));
  return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
}

void PrintWorkerTable(const v1::ListWorkersResponse& response, std::ostream& out) {
  Table table({"NAME", "STATE", "USED", "FREE", "TOTAL", "DEVICES", "CPUS", "MEMORY", "HEARTBEAT",
               "JOBS"});
  for (const v1::Worker& w : response.workers()) {
    table.AddRow({w.name(), WorkerStateName(w.state()), absl::StrCat(w.slots_used()),
                  absl::StrCat(w.slots_free()), absl::StrCat(w.slots_total()), DeviceSummary(w),
                  w.cpu_count() > 0 ? absl::StrCat(w.cpu_count()) : "-",
                  w.memory_bytes() > 0 ? FormatBytes(w.memory_bytes()) : "-",
                  absl::StrCat(FormatDuration(w.last_heartbeat_age().seconds()), " ago"),
                  JobSummary(w)});
  }
  table.Print(out);
}

}  // namespace deepnet::ctl
