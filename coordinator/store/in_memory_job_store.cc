#include "coordinator/store/in_memory_job_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {

InMemoryJobStore::InMemoryJobStore(std::function<int64_t()> now_ms)
    : now_ms_(now_ms ? std::move(now_ms) : std::function<int64_t()>(SystemNowMs)) {}

absl::StatusOr<InMemoryJobStore::Entry*> InMemoryJobStore::Find(absl::string_view id) {
  auto it = number_by_id_.find(id);
  if (it == number_by_id_.end()) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
  return &jobs_.at(it->second);
}

absl::StatusOr<CreateResult> InMemoryJobStore::Create(const JobRecord& request) {
  if (absl::Status s = ValidateNewJob(request); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  const auto key = std::make_pair(request.owner, request.idempotency_key);
  if (!request.idempotency_key.empty()) {
    if (auto it = number_by_key_.find(key); it != number_by_key_.end()) {
      return CreateResult{jobs_.at(it->second).record, /*replayed=*/true};
    }
  }
  const int64_t number = jobs_.empty() ? 1 : jobs_.rbegin()->first + 1;
  Entry entry;
  entry.record = MakeNewJob(request, number, now_ms_());
  entry.events.push_back(MakeCreatedEvent(entry.record));
  number_by_id_[entry.record.id] = number;
  if (!request.idempotency_key.empty()) number_by_key_[key] = number;
  const JobRecord& stored = jobs_.emplace(number, std::move(entry)).first->second.record;
  return CreateResult{stored, /*replayed=*/false};
}

absl::StatusOr<JobRecord> InMemoryJobStore::Get(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(id);
  if (!entry.ok()) return entry.status();
  return (*entry)->record;
}

absl::StatusOr<JobPage> InMemoryJobStore::List(const JobFilter& filter, int page_size,
                                               absl::string_view page_token) {
  absl::StatusOr<int> limit = EffectivePageSize(page_size);
  if (!limit.ok()) return limit.status();
  absl::StatusOr<int64_t> after = DecodePageToken(page_token);
  if (!after.ok()) return after.status();
  absl::MutexLock lock(&mu_);
  JobPage page;
  for (auto it = jobs_.upper_bound(*after); it != jobs_.end(); ++it) {
    if (!MatchesFilter(filter, it->second.record)) continue;
    if (static_cast<int>(page.records.size()) == *limit) {
      // Another match exists: hand out a token past the last job returned.
      page.next_page_token = EncodePageToken(number_by_id_.at(page.records.back().id));
      break;
    }
    page.records.push_back(it->second.record);
    if (!filter.with_spec) std::string().swap(page.records.back().spec_yaml);
  }
  return page;
}

absl::StatusOr<JobRecord> InMemoryJobStore::Transition(absl::string_view id,
                                                       const StateChange& change) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(id);
  if (!entry.ok()) return entry.status();
  JobRecord updated = (*entry)->record;
  JobEvent event;
  if (absl::Status s = ApplyStateChange(change, now_ms_(), &updated, &event); !s.ok()) return s;
  event.seq = static_cast<int64_t>((*entry)->events.size()) + 1;
  (*entry)->events.push_back(std::move(event));
  (*entry)->record = updated;
  return updated;
}

absl::StatusOr<JobRecord> InMemoryJobStore::SetReason(absl::string_view id, JobState expected,
                                                      absl::string_view reason) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(id);
  if (!entry.ok()) return entry.status();
  JobRecord updated = (*entry)->record;
  if (absl::Status s = ApplyReason(expected, reason, now_ms_(), &updated); !s.ok()) return s;
  (*entry)->record = updated;
  return updated;
}

absl::StatusOr<JobRecord> InMemoryJobStore::UpdateProgress(absl::string_view id,
                                                           const JobProgress& progress) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(id);
  if (!entry.ok()) return entry.status();
  JobRecord updated = (*entry)->record;
  if (absl::Status s = ApplyProgress(progress, now_ms_(), &updated); !s.ok()) return s;
  (*entry)->record = updated;
  return updated;
}

absl::StatusOr<JobEvent> InMemoryJobStore::AppendEvent(absl::string_view job_id,
                                                       absl::string_view kind,
                                                       absl::string_view message) {
  if (kind.empty()) return absl::InvalidArgumentError("event kind must not be empty");
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(job_id);
  if (!entry.ok()) return entry.status();
  JobEvent event{std::string(job_id), static_cast<int64_t>((*entry)->events.size()) + 1,
                 now_ms_(), std::string(kind), std::string(message)};
  (*entry)->events.push_back(event);
  return event;
}

absl::Status InMemoryJobStore::DeleteFinished(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  auto by_id = number_by_id_.find(id);
  if (by_id == number_by_id_.end()) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
  const int64_t number = by_id->second;
  const JobRecord& record = jobs_.at(number).record;
  if (absl::Status s = CheckDeletable(record, number == jobs_.rbegin()->first); !s.ok()) return s;
  if (!record.idempotency_key.empty()) number_by_key_.erase({record.owner, record.idempotency_key});
  jobs_.erase(number);
  number_by_id_.erase(by_id);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JobEvent>> InMemoryJobStore::ListEvents(absl::string_view job_id,
                                                                   int64_t after_seq) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(job_id);
  if (!entry.ok()) return entry.status();
  const std::vector<JobEvent>& events = (*entry)->events;
  std::vector<JobEvent> result;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(after_seq, 0)); i < events.size(); ++i) {
    result.push_back(events[i]);
  }
  return result;
}

}  // namespace deepnet::coordinator
