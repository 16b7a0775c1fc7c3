#include "coordinator/core/job_event_log.h"

#include <algorithm>

#include "coordinator/core/job_events.h"

namespace deepnet::coordinator {

size_t JobEventLog::Append(const std::vector<JobEvent>& stored) {
  std::vector<JobEventView> decoded = DecodeJobEvents(stored, &decoded_attempt_);
  events_.insert(events_.end(), decoded.begin(), decoded.end());
  return decoded.size();
}

std::vector<JobEventView> JobEventLog::After(int64_t after_seq, size_t max_events,
                                             bool* more) const {
  auto first = std::upper_bound(
      events_.begin(), events_.end(), after_seq,
      [](int64_t seq, const JobEventView& e) { return seq < e.sequence; });
  const size_t left = static_cast<size_t>(events_.end() - first);
  *more = left > max_events;
  return std::vector<JobEventView>(first,
                                   first + static_cast<std::ptrdiff_t>(std::min(left, max_events)));
}

}  // namespace deepnet::coordinator
