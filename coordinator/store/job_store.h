#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/store/job_state.h"

namespace deepnet::coordinator {

// One job as the coordinator keeps it. Plain data: the proto conversion lives at the service
// boundary. Fields marked "store" are assigned by the JobStore and ignored in Create().
struct JobRecord;
// What tells this job from any other that ever had its id (after a lost database ids start
// again): "<id>@<created_ms>" (Assignment.job_uid; the checkpoint FENCE records it).
std::string JobUid(const JobRecord& record);

struct JobRecord {
  // store: "j-000042"; the number is the creation order, starting at 1.
  std::string id;
  // The authenticated user who submitted the job; never empty.
  std::string owner;
  // Client-chosen retry key, unique per owner; empty means no idempotency.
  std::string idempotency_key;
  // The job's YAML text exactly as submitted.
  std::string spec_yaml;
  // Human-readable name from the spec; may be empty.
  std::string name;
  // Larger runs first.
  int32_t priority = 0;
  // Pipeline stages (P) and data-parallel replicas (D); the job has P x D ranks. Both >= 1.
  int32_t pipeline_stages = 1;
  int32_t data_parallel = 1;
  // P x D: the job's ranks (one trainer process each), computed 64-bit wide.
  int64_t world_size() const { return int64_t{pipeline_stages} * data_parallel; }
  // store: kQueued after Create; changed only through Transition().
  JobState state = JobState::kQueued;
  // Why the job is in its state (for QUEUED: why it is pending); set by Transition/SetReason.
  std::string state_reason;
  // store: the cause of the latest entry into kRecovering; empty until the first one.
  std::optional<RecoveryCause> last_recovery_cause;
  // store: restarts from a checkpoint so far (RECOVERING -> PLACING moves; not those after
  // WORKER_DRAINED, a worker that shut down).
  int32_t restarts = 0;
  // Restarts allowed before the job must fail; >= 0.
  int32_t max_restarts = 0;
  // store: 0 until the first STARTING; incremented on every entry into STARTING, so
  // (id, attempt) names one launch of the gang (rendezvous scope, worker command epoch).
  int32_t attempt = 0;
  // store: unix milliseconds.
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  // Latest training step reported; 0 before any report.
  int64_t last_step = 0;
  // Where the job's checkpoints are written: the spec's checkpoint.dir, stored by Create and
  // never changed; empty when the job writes none.
  std::string checkpoint_dir;
  // store: 1 after Create, +1 on every change (for compare-and-set by callers).
  int64_t version = 0;
};

// An entry in a job's append-only history.
struct JobEvent {
  std::string job_id;
  // 1, 2, 3, ... per job, in the order the events were appended.
  int64_t seq = 0;
  // Unix milliseconds.
  int64_t time_ms = 0;
  // "state" for the events the store writes itself (creation and every transition);
  // callers choose their own kinds ("placement", "worker", "checkpoint", ...).
  std::string kind;
  std::string message;
};

struct CreateResult {
  JobRecord record;
  // True when (owner, idempotency_key) already named a job: `record` is that first job,
  // unchanged, and nothing was written.
  bool replayed = false;
};

// A state change requested by the scheduler, compare-and-set on the current state.
struct StateChange {
  // The state the caller believes the job is in; ABORTED if it is not.
  JobState expected = JobState::kQueued;
  JobState to = JobState::kQueued;
  // Stored as JobRecord::state_reason and in the "state" event.
  std::string reason;
  // Required when `to` is kRecovering, forbidden otherwise.
  std::optional<RecoveryCause> cause;
  // If set, ABORTED unless the record's version equals it.
  std::optional<int64_t> expected_version;
};

// Progress reported by a job's trainers.
struct JobProgress {
  int64_t last_step = 0;
  // If set, ABORTED unless it equals the job's current attempt (drops stale reports).
  std::optional<int32_t> expected_attempt;
};

struct JobFilter {
  // Only this owner's jobs; empty means every owner.
  std::string owner;
  // Only jobs in one of these states; empty means every state.
  std::vector<JobState> states;
  // false: records come with spec_yaml empty (a listing that needs ids and states only need
  // not read up to 1 MiB per job).
  bool with_spec = true;
};

struct JobPage {
  // In creation order.
  std::vector<JobRecord> records;
  // Pass to List() for the next page; empty when this was the last page.
  std::string next_page_token;
};

// Durable record of every job and its events. A call that returns OK has made its change
// durable (for SqliteJobStore: on disk); a call that fails has changed nothing.
// Error codes: NOT_FOUND unknown job; INVALID_ARGUMENT bad input or page token;
// FAILED_PRECONDITION a transition not in the table, or a restart past max_restarts;
// ABORTED a compare-and-set lost (state, version or attempt differ).
// Implementations are safe for concurrent use.
class JobStore {
 public:
  virtual ~JobStore() = default;

  // Stores `record` as a new QUEUED job and returns it with the store fields filled in. If
  // record.idempotency_key is set and (owner, key) already names a job, returns that job with
  // replayed = true instead, also when the two calls race.
  [[nodiscard]] virtual absl::StatusOr<CreateResult> Create(const JobRecord& record) = 0;

  [[nodiscard]] virtual absl::StatusOr<JobRecord> Get(absl::string_view id) = 0;

  // Jobs matching `filter` in creation order, at most page_size (0 means 100; capped at 1000)
  // after the position encoded in page_token (empty: from the start). Tokens stay valid while
  // jobs are added: paging through sees every job that existed at the first call exactly once.
  [[nodiscard]] virtual absl::StatusOr<JobPage> List(const JobFilter& filter, int page_size,
                                                     absl::string_view page_token) = 0;

  // Atomically checks `change` against the job and the transition table and applies it:
  // state, state_reason, last_recovery_cause, restarts (+1 on RECOVERING -> PLACING unless the
  // cause was WORKER_DRAINED),
  // attempt (+1 on entering STARTING), version, and a "state" event. Returns the new record.
  [[nodiscard]] virtual absl::StatusOr<JobRecord> Transition(absl::string_view id,
                                                             const StateChange& change) = 0;

  // Replaces state_reason without changing state (a pending job's reason changes while it
  // waits); ABORTED unless the job is in `expected`. Writes no event.
  [[nodiscard]] virtual absl::StatusOr<JobRecord> SetReason(absl::string_view id,
                                                            JobState expected,
                                                            absl::string_view reason) = 0;

  [[nodiscard]] virtual absl::StatusOr<JobRecord> UpdateProgress(absl::string_view id,
                                                                 const JobProgress& progress) = 0;

  // Appends an event (seq assigned by the store) and returns it.
  [[nodiscard]] virtual absl::StatusOr<JobEvent> AppendEvent(absl::string_view job_id,
                                                             absl::string_view kind,
                                                             absl::string_view message) = 0;

  // The job's events with seq > after_seq, in seq order.
  [[nodiscard]] virtual absl::StatusOr<std::vector<JobEvent>> ListEvents(
      absl::string_view job_id, int64_t after_seq) = 0;

  // Deletes a finished job (SUCCEEDED, FAILED or CANCELLED) with its events (retention).
  // FAILED_PRECONDITION for a job not finished, and for the newest job (highest number), which
  // is always kept: ids are the highest number + 1, so deleting it could hand its id out again.
  [[nodiscard]] virtual absl::Status DeleteFinished(absl::string_view id) = 0;
};

// Why DeleteFinished keeps `record` (FAILED_PRECONDITION), or OK.
[[nodiscard]] absl::Status CheckDeletable(const JobRecord& record, bool newest);

// --- Helpers shared by the implementations (same semantics by construction). ---

// "j-000042" for 42; more digits once the six are used up.
std::string JobIdFromNumber(int64_t number);

// OK if `record` can be created; INVALID_ARGUMENT naming the field otherwise.
[[nodiscard]] absl::Status ValidateNewJob(const JobRecord& record);

// The record Create() stores: the caller's fields plus id, state and counters.
JobRecord MakeNewJob(const JobRecord& request, int64_t number, int64_t now_ms);

// The "state" event Create() appends (seq 1).
JobEvent MakeCreatedEvent(const JobRecord& created);

// The fields of a "state" event's message, which MakeCreatedEvent ("created QUEUED[: reason]")
// and ApplyStateChange ("FROM -> TO[ (CAUSE)][: reason]") write.
struct StateEventFields {
  std::optional<JobState> from;  // unset for the creation event
  JobState to = JobState::kQueued;
  std::optional<RecoveryCause> cause;
  std::string reason;
};
// Parses a "state" event's message; INVALID_ARGUMENT for text those two did not write.
[[nodiscard]] absl::StatusOr<StateEventFields> ParseStateEventMessage(absl::string_view message);

// Checks `change` against `*record` and applies it at now_ms; on error *record is unchanged.
// `*event` receives the message and kind of the "state" event (seq left to the caller).
[[nodiscard]] absl::Status ApplyStateChange(const StateChange& change, int64_t now_ms,
                                            JobRecord* record, JobEvent* event);

[[nodiscard]] absl::Status ApplyReason(JobState expected, absl::string_view reason,
                                       int64_t now_ms, JobRecord* record);

[[nodiscard]] absl::Status ApplyProgress(const JobProgress& progress, int64_t now_ms,
                                         JobRecord* record);

// page_size as List() uses it: 0 -> 100, capped at 1000; INVALID_ARGUMENT if negative.
[[nodiscard]] absl::StatusOr<int> EffectivePageSize(int page_size);

// The creation number in an id made by JobIdFromNumber ("j-000042" -> 42); INVALID_ARGUMENT
// for anything else.
[[nodiscard]] absl::StatusOr<int64_t> JobNumberFromId(absl::string_view id);

// Opaque page tokens: the creation number of the last job on the previous page.
std::string EncodePageToken(int64_t last_number);
// 0 for the empty token; INVALID_ARGUMENT for a token this store did not make.
[[nodiscard]] absl::StatusOr<int64_t> DecodePageToken(absl::string_view token);

// True if `record` passes `filter`.
bool MatchesFilter(const JobFilter& filter, const JobRecord& record);

// Unix milliseconds from the system clock.
int64_t SystemNowMs();

}  // namespace deepnet::coordinator
