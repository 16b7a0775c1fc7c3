#include "coordinator/core/worker_registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "coordinator/auth/secrets.h"

namespace deepnet::coordinator {
namespace {

bool ValidWorkerName(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_';
  });
}

}  // namespace

WorkerRegistry::WorkerRegistry(WorkerEpochStore* epochs, GangScheduler* scheduler,
                               CoordinatorMetrics* metrics,
                               std::chrono::milliseconds heartbeat_interval, int lease_heartbeats)
    : epochs_(epochs),
      scheduler_(scheduler),
      metrics_(metrics),
      heartbeat_interval_(heartbeat_interval),
      lease_heartbeats_(lease_heartbeats) {}

absl::Status WorkerRegistry::CheckRegistration(const Registration& registration) {
  if (!ValidWorkerName(registration.worker_name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_name \"", registration.worker_name, "\" must be 1-128 of [A-Za-z0-9._-]"));
  }
  const int n = static_cast<int>(registration.slots.size());
  if (n < 1) return absl::InvalidArgumentError("slots: a worker must offer at least one slot");
  std::set<int> indices;
  for (const SlotFacts& s : registration.slots) {
    if (s.index < 0 || s.index >= n || !indices.insert(s.index).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slots: indices must be 0..", n - 1, " each once (got ", s.index, ")"));
    }
  }
  return absl::OkStatus();
}

namespace {

// The scheduler places by the smallest slot of a worker; unknown (0) on any slot: unknown.
int64_t SmallestSlotMemory(const Registration& registration) {
  int64_t slot_memory = INT64_MAX;
  for (const SlotFacts& s : registration.slots) {
    slot_memory = std::min(slot_memory, std::max<int64_t>(s.memory_bytes, 0));
  }
  return slot_memory;
}

}  // namespace

absl::StatusOr<int64_t> WorkerRegistry::BeginRegistration(const Registration& registration,
                                                          std::vector<LostRanks>* lost) {
  absl::StatusOr<int64_t> epoch = epochs_->Next(registration.worker_name);
  if (!epoch.ok()) return epoch.status();
  const std::string& id = registration.worker_name;
  Worker& worker = workers_[id];
  worker.id = id;
  if (worker.sink) {
    worker.sink->Close(absl::AbortedError(
        absl::StrCat("worker ", id, " registered again (epoch ", *epoch, ")")));
    worker.sink = nullptr;
  }
  const int n = static_cast<int>(registration.slots.size());
  const int64_t slot_memory = SmallestSlotMemory(registration);
  const std::optional<WorkerInfo> known = scheduler_->FindWorker(id);
  if (known.has_value() && (known->slots != n || known->slot_memory != slot_memory)) {
    absl::StatusOr<std::vector<LostRanks>> removed = scheduler_->RemoveWorker(id);
    if (removed.ok()) *lost = std::move(*removed);
  }
  return epoch;
}

absl::StatusOr<WorkerRegistry::Worker*> WorkerRegistry::CompleteRegistration(
    const Registration& registration, int64_t epoch) {
  const std::string& id = registration.worker_name;
  absl::StatusOr<std::string> secret = RandomHex(16);
  if (!secret.ok()) return secret.status();
  if (!scheduler_->FindWorker(id).has_value()) {
    if (absl::Status s = scheduler_->AddWorker(id, static_cast<int>(registration.slots.size()),
                                               SmallestSlotMemory(registration));
        !s.ok()) {
      return s;
    }
  }
  // No placements until its session is open (a gang must not land on a worker it cannot reach).
  (void)scheduler_->UpdateWorkerState(id, WorkerState::kDraining);
  Worker& worker = workers_.at(id);
  worker.epoch = epoch;
  worker.session_secret = std::move(*secret);
  worker.host = registration.host;
  worker.slots = registration.slots;
  worker.last_heard = Clock::now();
  worker.lost = false;
  worker.draining = registration.draining;
  worker.missed_reported = 0;
  worker.pending_cancels.clear();
  return &worker;
}

int64_t WorkerRegistry::lease_ms() const {
  return heartbeat_interval_.count() * lease_heartbeats_;
}

absl::StatusOr<WorkerRegistry::Worker*> WorkerRegistry::Current(const std::string& worker_id,
                                                                int64_t epoch) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", worker_id, " is not registered"));
  }
  if (it->second.epoch != epoch || it->second.lost) {
    return absl::AbortedError(absl::StrCat("worker ", worker_id, ": epoch ", epoch,
                                           " is stale (current ", it->second.epoch,
                                           it->second.lost ? ", worker was lost" : "",
                                           "); register again"));
  }
  return &it->second;
}

absl::StatusOr<WorkerRegistry::Worker*> WorkerRegistry::Heard(const std::string& worker_id,
                                                              int64_t epoch) {
  absl::StatusOr<Worker*> worker = Current(worker_id, epoch);
  if (worker.ok()) (*worker)->last_heard = Clock::now();
  return worker;
}

absl::Status WorkerRegistry::AttachSession(const std::string& worker_id, int64_t epoch,
                                           const std::string& session_secret,
                                           std::shared_ptr<WorkerCommandSink> sink) {
  absl::StatusOr<Worker*> worker = Current(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  Worker& w = **worker;
  if (!ConstantTimeEquals(w.session_secret, session_secret)) {
    return absl::PermissionDeniedError(
        absl::StrCat("session of worker ", worker_id, " epoch ", epoch,
                     ": wrong session secret (use the one its registration returned)"));
  }
  if (w.sink) w.sink->Close(absl::AbortedError("a newer session replaced this one"));
  w.sink = std::move(sink);
  w.last_heard = Clock::now();
  for (const CancellationCommand& c : w.pending_cancels) w.sink->SendCancellation(w.epoch, c);
  w.pending_cancels.clear();
  // A worker that is shutting down stays draining (it only reports its trainers' endings).
  if (!w.draining) (void)scheduler_->UpdateWorkerState(worker_id, WorkerState::kReady);
  return absl::OkStatus();
}

bool WorkerRegistry::DetachSession(const std::string& worker_id, int64_t epoch,
                                   const WorkerCommandSink* sink) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.epoch != epoch || it->second.sink.get() != sink) {
    return false;
  }
  it->second.sink = nullptr;
  // Its ranks keep running; it takes no new ones until it is back (or its lease runs out).
  if (!it->second.lost) (void)scheduler_->UpdateWorkerState(worker_id, WorkerState::kDraining);
  return true;
}

bool WorkerRegistry::BeginDraining(Worker& worker, std::chrono::milliseconds grace,
                                   const std::string& reason) {
  if (worker.draining) return false;
  worker.draining = true;
  worker.drain_grace = std::max(grace, std::chrono::milliseconds(0));
  (void)scheduler_->UpdateWorkerState(worker.id, WorkerState::kDraining);
  spdlog::info("worker {} is shutting down ({}): draining, its trainers get {} ms to checkpoint",
               worker.id, reason, worker.drain_grace.count());
  return true;
}

void WorkerRegistry::SendLease(const Worker& worker) {
  if (!worker.sink) return;
  worker.sink->SendLease(worker.epoch, lease_ms(), SystemNowMs() + lease_ms());
}

void WorkerRegistry::ExpireLeases(Clock::time_point now, const OnLost& on_lost) {
  const auto interval = heartbeat_interval_;
  const auto lease = interval * lease_heartbeats_;
  for (auto& [id, worker] : workers_) {
    if (worker.lost) continue;
    const auto silent = now - worker.last_heard;
    // A heartbeat counts as missed once half an interval past when it was due.
    while (silent > interval * (worker.missed_reported + 1) + interval / 2 &&
           worker.missed_reported < lease_heartbeats_) {
      ++worker.missed_reported;
      if (metrics_ != nullptr) metrics_->IncHeartbeatsMissed(1);
    }
    if (silent <= lease) continue;
    const std::string why = absl::StrCat("worker ", id, " missed ", lease_heartbeats_,
                                         " heartbeats (lease ", lease.count(), " ms)");
    spdlog::warn("{}", why);
    worker.lost = true;
    if (worker.sink) worker.sink->Close(absl::UnavailableError(why));
    worker.sink = nullptr;
    absl::StatusOr<std::vector<LostRanks>> lost =
        scheduler_->UpdateWorkerState(worker.id, WorkerState::kLost);
    on_lost(id, lost.ok() ? *lost : std::vector<LostRanks>(), why);
  }
}

void WorkerRegistry::CloseAll(const absl::Status& why) {
  for (auto& [id, worker] : workers_) {
    if (worker.sink) worker.sink->Close(why);
    worker.sink = nullptr;
  }
}

const WorkerRegistry::Worker* WorkerRegistry::Find(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : &it->second;
}

WorkerState WorkerRegistry::StateOf(const Worker& w) {
  return w.lost                  ? WorkerState::kLost
         : w.sink && !w.draining ? WorkerState::kReady
                                 : WorkerState::kDraining;
}

std::map<WorkerState, int64_t> WorkerRegistry::CountByState() const {
  std::map<WorkerState, int64_t> counts = {
      {WorkerState::kReady, 0}, {WorkerState::kDraining, 0}, {WorkerState::kLost, 0}};
  for (const auto& [id, w] : workers_) ++counts[StateOf(w)];
  return counts;
}

std::vector<WorkerView> WorkerRegistry::Views(Clock::time_point now) const {
  std::vector<WorkerView> out;
  out.reserve(workers_.size());
  for (const auto& [id, w] : workers_) {
    WorkerView view;
    view.id = id;
    view.state = StateOf(w);
    view.host = w.host;
    view.heartbeat_age_ms =
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                 now - w.last_heard).count());
    view.slots.resize(w.slots.size());
    for (const SlotFacts& facts : w.slots) {
      // CheckRegistration made the indices 0..n-1, each once.
      view.slots[static_cast<size_t>(facts.index)].facts = facts;
    }
    out.push_back(std::move(view));
  }
  return out;
}

void WorkerRegistry::SendCancel(const std::string& worker_id, const CancellationCommand& command) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.lost) return;
  Worker& worker = it->second;
  // A worker shutting down stops every trainer itself, with its own grace period; a
  // cancellation with the coordinator's (shorter) grace would cut their checkpoint short.
  if (worker.draining) return;
  if (worker.sink) {
    worker.sink->SendCancellation(worker.epoch, command);
    return;
  }
  for (const CancellationCommand& c : worker.pending_cancels) {
    if (c.job_id == command.job_id && c.attempt == command.attempt) return;
  }
  worker.pending_cancels.push_back(command);
}

bool WorkerRegistry::HasSession(const std::string& worker_id) const {
  const Worker* w = Find(worker_id);
  return w != nullptr && !w->lost && w->sink != nullptr;
}

bool WorkerRegistry::SendAssignment(const std::string& worker_id,
                                    const AssignmentCommand& command) {
  if (!HasSession(worker_id)) return false;
  const Worker& w = workers_.at(worker_id);
  w.sink->SendAssignment(w.epoch, command);
  return true;
}

std::optional<std::chrono::milliseconds> WorkerRegistry::DrainGrace(
    const std::string& worker_id) const {
  const Worker* w = Find(worker_id);
  if (w == nullptr || !w->draining) return std::nullopt;
  return w->drain_grace;
}

}  // namespace deepnet::coordinator
