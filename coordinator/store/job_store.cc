#include "coordinator/store/job_store.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "job/world_size.h"

namespace deepnet::coordinator {

std::string JobUid(const JobRecord& record) {
  return absl::StrCat(record.id, "@", record.created_ms);
}
namespace {

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;
// Versioned so the encoding can change without misreading old tokens.
constexpr absl::string_view kPageTokenPrefix = "jobs.v1:";

absl::Status CheckText(absl::string_view field, absl::string_view value, size_t max_bytes) {
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", value.size(), " bytes; at most ", max_bytes, " allowed"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string JobIdFromNumber(int64_t number) { return absl::StrFormat("j-%06d", number); }

absl::StatusOr<int64_t> JobNumberFromId(absl::string_view id) {
  int64_t number = 0;
  if (!absl::ConsumePrefix(&id, "j-") || id.empty() ||
      !std::all_of(id.begin(), id.end(), absl::ascii_isdigit) || !absl::SimpleAtoi(id, &number)) {
    return absl::InvalidArgumentError(absl::StrCat("not a job id: '", id, "'"));
  }
  return number;
}

absl::Status CheckDeletable(const JobRecord& record, bool newest) {
  if (!IsTerminal(record.state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", record.id, " is ", ToString(record.state), ": only finished jobs are deleted"));
  }
  if (newest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", record.id, " is the newest job: it is kept so that its id is never reused"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNewJob(const JobRecord& record) {
  if (record.owner.empty()) return absl::InvalidArgumentError("owner must not be empty");
  if (absl::Status s = job::CheckStagesAndReplicas(record.pipeline_stages, record.data_parallel);
      !s.ok()) {
    return s;
  }
  if (record.max_restarts < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_restarts must be >= 0, got ", record.max_restarts));
  }
  if (absl::Status s = CheckText("owner", record.owner, 256); !s.ok()) return s;
  if (absl::Status s = CheckText("idempotency_key", record.idempotency_key, 256); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckText("name", record.name, 1024); !s.ok()) return s;
  return CheckText("spec_yaml", record.spec_yaml, 16 << 20);
}

JobRecord MakeNewJob(const JobRecord& request, int64_t number, int64_t now_ms) {
  JobRecord record = request;
  record.id = JobIdFromNumber(number);
  record.state = JobState::kQueued;
  record.last_recovery_cause.reset();
  record.restarts = 0;
  record.attempt = 0;
  record.created_ms = now_ms;
  record.updated_ms = now_ms;
  record.version = 1;
  return record;
}

JobEvent MakeCreatedEvent(const JobRecord& created) {
  JobEvent event;
  event.job_id = created.id;
  event.seq = 1;
  event.time_ms = created.created_ms;
  event.kind = "state";
  event.message = absl::StrCat("created ", ToString(created.state));
  if (!created.state_reason.empty()) absl::StrAppend(&event.message, ": ", created.state_reason);
  return event;
}

absl::Status ApplyStateChange(const StateChange& change, int64_t now_ms, JobRecord* record,
                              JobEvent* event) {
  if (record->state != change.expected) {
    return absl::AbortedError(absl::StrCat("job ", record->id, " is ", ToString(record->state),
                                           ", expected ", ToString(change.expected)));
  }
  if (change.expected_version.has_value() && *change.expected_version != record->version) {
    return absl::AbortedError(absl::StrCat("job ", record->id, " is at version ",
                                           record->version, ", not ", *change.expected_version));
  }
  if (absl::Status s = CheckTransition(change.expected, change.to); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", record->id, ": ", s.message()));
  }
  const bool to_recovering = change.to == JobState::kRecovering;
  if (to_recovering != change.cause.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", record->id, ": a recovery cause is ", to_recovering ? "required" : "only allowed",
        " for ", ToString(change.expected), " -> ", ToString(change.to),
        to_recovering ? "" : " when the target is RECOVERING"));
  }
  const bool restart = change.expected == JobState::kRecovering &&
                       change.to == JobState::kPlacing &&
                       CountsAgainstMaxRestarts(record->last_recovery_cause);
  if (restart && record->restarts >= record->max_restarts) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", record->id, " has used ", record->restarts, " of ",
                     record->max_restarts, " restarts; it can only move to FAILED"));
  }
  record->state = change.to;
  record->state_reason = change.reason;
  if (change.cause.has_value()) record->last_recovery_cause = change.cause;
  if (restart) ++record->restarts;
  if (change.to == JobState::kStarting) ++record->attempt;
  record->updated_ms = now_ms;
  ++record->version;

  event->job_id = record->id;
  event->time_ms = now_ms;
  event->kind = "state";
  event->message = absl::StrCat(ToString(change.expected), " -> ", ToString(change.to));
  if (change.cause.has_value()) absl::StrAppend(&event->message, " (", ToString(*change.cause), ")");
  if (!change.reason.empty()) absl::StrAppend(&event->message, ": ", change.reason);
  return absl::OkStatus();
}

absl::StatusOr<StateEventFields> ParseStateEventMessage(absl::string_view message) {
  StateEventFields fields;
  absl::string_view rest = message;
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("not a job state event message: \"", message, "\""));
  };
  if (!absl::ConsumePrefix(&rest, "created ")) {
    const size_t arrow = rest.find(" -> ");
    if (arrow == absl::string_view::npos) return bad();
    absl::StatusOr<JobState> from = ParseJobState(rest.substr(0, arrow));
    if (!from.ok()) return bad();
    fields.from = *from;
    rest.remove_prefix(arrow + 4);
  }
  const size_t end = rest.find_first_of(" :");
  absl::StatusOr<JobState> to = ParseJobState(rest.substr(0, end));
  if (!to.ok()) return bad();
  fields.to = *to;
  rest = end == absl::string_view::npos ? absl::string_view() : rest.substr(end);
  if (absl::ConsumePrefix(&rest, " (")) {
    const size_t close = rest.find(')');
    if (close == absl::string_view::npos) return bad();
    absl::StatusOr<RecoveryCause> cause = ParseRecoveryCause(rest.substr(0, close));
    if (!cause.ok()) return bad();
    fields.cause = *cause;
    rest.remove_prefix(close + 1);
  }
  if (!rest.empty() && !absl::ConsumePrefix(&rest, ": ")) return bad();
  fields.reason = std::string(rest);
  return fields;
}

absl::Status ApplyReason(JobState expected, absl::string_view reason, int64_t now_ms,
                         JobRecord* record) {
  if (record->state != expected) {
    return absl::AbortedError(absl::StrCat("job ", record->id, " is ", ToString(record->state),
                                           ", expected ", ToString(expected)));
  }
  record->state_reason = std::string(reason);
  record->updated_ms = now_ms;
  ++record->version;
  return absl::OkStatus();
}

absl::Status ApplyProgress(const JobProgress& progress, int64_t now_ms, JobRecord* record) {
  if (progress.last_step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", record->id, ": last_step must be >= 0, got ", progress.last_step));
  }
  if (progress.expected_attempt.has_value() && *progress.expected_attempt != record->attempt) {
    return absl::AbortedError(absl::StrCat("job ", record->id, " is at attempt ",
                                           record->attempt, ", report is for attempt ",
                                           *progress.expected_attempt));
  }
  record->last_step = progress.last_step;
  record->updated_ms = now_ms;
  ++record->version;
  return absl::OkStatus();
}

absl::StatusOr<int> EffectivePageSize(int page_size) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size must be >= 0, got ", page_size));
  }
  if (page_size == 0) return kDefaultPageSize;
  return std::min(page_size, kMaxPageSize);
}

std::string EncodePageToken(int64_t last_number) {
  return absl::WebSafeBase64Escape(absl::StrCat(kPageTokenPrefix, last_number));
}

absl::StatusOr<int64_t> DecodePageToken(absl::string_view token) {
  if (token.empty()) return 0;
  std::string decoded;
  int64_t number = 0;
  absl::string_view rest;
  if (absl::WebSafeBase64Unescape(token, &decoded)) rest = decoded;
  if (!absl::ConsumePrefix(&rest, kPageTokenPrefix) || !absl::SimpleAtoi(rest, &number) ||
      number < 1) {
    return absl::InvalidArgumentError(absl::StrCat("invalid page token '", token, "'"));
  }
  return number;
}

bool MatchesFilter(const JobFilter& filter, const JobRecord& record) {
  if (!filter.owner.empty() && filter.owner != record.owner) return false;
  return filter.states.empty() ||
         std::find(filter.states.begin(), filter.states.end(), record.state) !=
             filter.states.end();
}

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace deepnet::coordinator
