#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/job_store.h"

namespace deepnet::coordinator {

// JobStore kept in memory: the same semantics as SqliteJobStore without durability, for
// tests and for coordinators run without a state file. Safe for concurrent use (one mutex).
class InMemoryJobStore final : public JobStore {
 public:
  // now_ms supplies timestamps (unix ms); empty means the system clock.
  explicit InMemoryJobStore(std::function<int64_t()> now_ms = {});

  // JobStore:
  absl::StatusOr<CreateResult> Create(const JobRecord& record) override;
  absl::StatusOr<JobRecord> Get(absl::string_view id) override;
  absl::StatusOr<JobPage> List(const JobFilter& filter, int page_size,
                               absl::string_view page_token) override;
  absl::StatusOr<JobRecord> Transition(absl::string_view id, const StateChange& change) override;
  absl::StatusOr<JobRecord> SetReason(absl::string_view id, JobState expected,
                                      absl::string_view reason) override;
  absl::StatusOr<JobRecord> UpdateProgress(absl::string_view id,
                                           const JobProgress& progress) override;
  absl::StatusOr<JobEvent> AppendEvent(absl::string_view job_id, absl::string_view kind,
                                       absl::string_view message) override;
  absl::StatusOr<std::vector<JobEvent>> ListEvents(absl::string_view job_id,
                                                   int64_t after_seq) override;
  absl::Status DeleteFinished(absl::string_view id) override;

 private:
  struct Entry {
    JobRecord record;
    std::vector<JobEvent> events;  // [seq - 1]
  };

  // The entry for `id`, or NOT_FOUND.
  absl::StatusOr<Entry*> Find(absl::string_view id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<int64_t()> now_ms_;
  absl::Mutex mu_;
  std::map<int64_t, Entry> jobs_ ABSL_GUARDED_BY(mu_);  // [creation number]
  absl::flat_hash_map<std::string, int64_t> number_by_id_ ABSL_GUARDED_BY(mu_);
  // (owner, idempotency_key) -> creation number.
  std::map<std::pair<std::string, std::string>, int64_t> number_by_key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace deepnet::coordinator
