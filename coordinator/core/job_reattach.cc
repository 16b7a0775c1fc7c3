#include "coordinator/core/job_reattach.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {

void JobReattach::Begin(JobClock::time_point deadline) {
  active_ = true;
  deadline_ = deadline;
}

void JobReattach::ExpectPlacement(std::vector<std::string> rank_workers) {
  expected_ = std::move(rank_workers);
}

bool JobReattach::Holds(int rank, const std::string& worker_id) const {
  if (expected_.empty()) return true;
  return rank >= 0 && rank < static_cast<int>(expected_.size()) && expected_[rank] == worker_id;
}

void JobReattach::OnRunning(const RankView& view, TaskPhase phase) {
  running_[view.rank] = view;
  phases_[view.rank] = phase;
}

void JobReattach::OnExit(int rank, const std::string& worker_id, bool clean) {
  running_.erase(rank);
  exits_[rank] = {worker_id, clean};
}

void JobReattach::ForgetWorker(const std::string& worker_id) {
  for (auto it = running_.begin(); it != running_.end();) {
    it = it->second.worker_id == worker_id ? running_.erase(it) : std::next(it);
  }
}

std::map<int, RankView> JobReattach::End() {
  active_ = false;
  std::map<int, RankView> running = std::move(running_);
  running_.clear();
  phases_.clear();
  exits_.clear();
  expected_.clear();
  return running;
}

JobReattach::Outcome JobReattach::Check(int64_t world_size, int64_t data_parallel) const {
  Outcome out;
  if (static_cast<int64_t>(running_.size() + exits_.size()) < world_size) return out;
  for (const auto& [rank, exit] : exits_) {
    if (!exit.second && out.failed.empty()) {
      out.failed = absl::StrCat("rank ", rank, " on worker ", exit.first,
                                " failed while the coordinator was away");
    }
    out.all_clean &= exit.second;
  }
  if (running_.empty()) {
    out.kind = Outcome::Kind::kEnded;
    return out;
  }
  out.kind = Outcome::Kind::kReadopt;
  const auto view_of = [data_parallel](int rank, const std::string& worker, int slot) {
    return RankView{rank, static_cast<int>(rank / data_parallel),
                    static_cast<int>(rank % data_parallel), worker, slot};
  };
  // Exited ranks get a slot of their worker for the books (theirs is free now anyway).
  std::map<std::string, std::set<int>> used;
  for (const auto& [rank, view] : running_) used[view.worker_id].insert(view.slot);
  std::map<int, RankRun> all;
  for (const auto& [rank, view] : running_) {
    RankRun& r = all[rank];
    r.view = view;
    auto phase = phases_.find(rank);
    r.phase = phase != phases_.end() ? phase->second : TaskPhase::kStarting;
  }
  for (const auto& [rank, exit] : exits_) {
    int slot = 0;
    while (used[exit.first].count(slot)) ++slot;
    used[exit.first].insert(slot);
    RankRun& r = all[rank];
    r.view = view_of(rank, exit.first, slot);
    r.exited = true;
    r.clean_exit = exit.second;
    r.phase = TaskPhase::kExited;
  }
  for (auto& [rank, r] : all) out.ranks.push_back(std::move(r));
  return out;
}

}  // namespace deepnet::coordinator
