#include "coordinator/core/job_events.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"

namespace deepnet::coordinator {
namespace {

constexpr struct {
  EventType type;
  const char* kind;
} kKinds[] = {
    {EventType::kPlaced, "placed"},
    {EventType::kRankExited, "rank_exited"},
    {EventType::kWorkerLost, "worker_lost"},
    {EventType::kCheckpointSaved, "checkpoint_saved"},
    {EventType::kHangDetected, "hang_detected"},
    {EventType::kCancelRequested, "cancel_requested"},
    {EventType::kGuardRollback, "guard_rollback"},
    {EventType::kGuardFailed, "guard_failed"},
    {EventType::kPlateau, "plateau"},
    {EventType::kFailRequested, "fail_requested"},
};

}  // namespace

EncodedEvent EncodeJobEvent(const JobEventView& event) {
  EncodedEvent out;
  for (const auto& k : kKinds) {
    if (k.type == event.type) out.kind = k.kind;
  }
  nlohmann::json j = {{"attempt", event.attempt}, {"message", event.message}};
  switch (event.type) {
    case EventType::kRankExited:
      j["rank"] = event.rank;
      j["exit_code"] = event.exit_code;
      j["signal"] = event.signal;
      j["worker_id"] = event.worker_id;
      break;
    case EventType::kWorkerLost:
      j["worker_id"] = event.worker_id;
      break;
    case EventType::kPlaced:
      j["worker_id"] = event.worker_id;
      if (!event.rank_workers.empty()) j["rank_workers"] = event.rank_workers;
      break;
    case EventType::kCheckpointSaved:
      j["checkpoint_step"] = event.checkpoint_step;
      break;
    case EventType::kGuardRollback:
    case EventType::kGuardFailed:
      j["guard_trigger"] = event.guard_trigger;
      j["guard_to_step"] = event.guard_to_step;
      j["guard_retries"] = event.guard_retries;
      break;
    default:
      break;
  }
  out.message = j.dump();
  return out;
}

std::vector<JobEventView> DecodeJobEvents(const std::vector<JobEvent>& events, int* attempt_in) {
  std::vector<JobEventView> out;
  out.reserve(events.size());
  int& attempt = *attempt_in;
  for (const JobEvent& e : events) {
    JobEventView view;
    view.job_id = e.job_id;
    view.sequence = e.seq;
    view.time_ms = e.time_ms;
    if (e.kind == "state") {
      view.type = EventType::kStateChanged;
      absl::StatusOr<StateEventFields> fields = ParseStateEventMessage(e.message);
      if (fields.ok()) {
        view.from_state = fields->from;
        view.to_state = fields->to;
        view.cause = fields->cause;
        view.message = fields->reason;
      } else {
        view.type = EventType::kOther;
        view.message = e.message;
      }
      if (view.from_state.has_value() && view.to_state == JobState::kStarting) ++attempt;
      view.attempt = attempt;
      out.push_back(std::move(view));
      continue;
    }
    bool known = false;
    for (const auto& k : kKinds) {
      if (e.kind == k.kind) {
        view.type = k.type;
        known = true;
      }
    }
    const nlohmann::json j = nlohmann::json::parse(e.message, nullptr, /*allow_exceptions=*/false);
    if (!known || !j.is_object()) {
      view.type = EventType::kOther;
      view.message = absl::StrCat(e.kind, ": ", e.message);
      view.attempt = attempt;
      out.push_back(std::move(view));
      continue;
    }
    view.attempt = j.value("attempt", attempt);
    view.message = j.value("message", std::string());
    view.rank = j.value("rank", 0);
    view.exit_code = j.value("exit_code", 0);
    view.signal = j.value("signal", 0);
    view.worker_id = j.value("worker_id", std::string());
    view.checkpoint_step = j.value("checkpoint_step", int64_t{0});
    view.guard_trigger = j.value("guard_trigger", std::string());
    view.guard_to_step = j.value("guard_to_step", int64_t{0});
    view.guard_retries = j.value("guard_retries", 0);
    const auto rank_workers = j.find("rank_workers");
    if (rank_workers != j.end() && rank_workers->is_array()) {
      for (const nlohmann::json& w : *rank_workers) {
        view.rank_workers.push_back(w.is_string() ? w.get<std::string>() : std::string());
      }
    }
    out.push_back(std::move(view));
  }
  return out;
}

}  // namespace deepnet::coordinator
