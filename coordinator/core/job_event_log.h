#pragma once
// A job's events as the API shows them, decoded once: WatchJob serves these, and the store is
// read once per new event.

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/core/coordinator_types.h"
#include "coordinator/store/job_store.h"

namespace deepnet::coordinator {

class JobEventLog {
 public:
  // Decodes stored events and appends them; returns how many views were added.
  size_t Append(const std::vector<JobEvent>& stored);
  // Every event, by sequence.
  const std::vector<JobEventView>& all() const { return events_; }
  int64_t last_sequence() const { return events_.empty() ? 0 : events_.back().sequence; }
  // The events after `after_seq`, at most `max_events`; `more` says whether some were left.
  std::vector<JobEventView> After(int64_t after_seq, size_t max_events, bool* more) const;

 private:
  std::vector<JobEventView> events_;
  int decoded_attempt_ = 0;  // the decoder's attempt count
};

}  // namespace deepnet::coordinator
