#pragma once
// What JobService's server streams (WatchJob, StreamMetrics, GetJobLogs) share while they are
// served on gRPC's callback API, without a thread each: the per-user cap on open streams, the
// wake-ups when a job's feed changes (Coordinator::SetFeedListener), timers, and a small pool
// of threads for the reads that block (a trainer log part travels to its worker and back).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/auth/auth.h"

namespace deepnet::coordinator {

struct StreamLimits {
  // Open streams (all three RPCs together) one user may hold; 0: no limit.
  int per_user = 64;
  // The same for admins (dashboards, operators watching everything).
  int per_admin = 1024;
  // Threads that run blocking reads (log parts: a worker round trip each) for the streams:
  // this many from the start, more on demand while every one is busy, up to
  // max_blocking_threads (so a few workers that answer slowly cannot hold up everyone's logs).
  int blocking_threads = 4;
  int max_blocking_threads = 64;
  // How often every stream looks at its feed even without a wake-up (a safety net; a feed
  // change wakes its streams at once).
  absl::Duration sweep_interval = absl::Seconds(2);
};

// A stream the hub can wake. Wake() is called on a hub thread holding no hub lock.
class Wakeable {
 public:
  virtual ~Wakeable() = default;
  virtual void Wake() = 0;
};

class StreamHub {
 public:
  explicit StreamHub(StreamLimits limits);
  ~StreamHub();  // stops and joins the hub's threads (after the server has shut down)
  StreamHub(const StreamHub&) = delete;
  StreamHub& operator=(const StreamHub&) = delete;

  // Counts a new stream of `who` against its limit: RESOURCE_EXHAUSTED naming the limit when
  // it is reached. Release() gives the place back.
  [[nodiscard]] absl::Status Acquire(const Principal& who);
  void Release(const Principal& who);

  // Wake `stream` whenever job_id's feed changes (and at every sweep) until Unsubscribe.
  int64_t Subscribe(const std::string& job_id, std::weak_ptr<Wakeable> stream);
  void Unsubscribe(int64_t id);

  // Feed listener: wake the streams of job_id ("": every stream). Only queues, so it may be
  // called under the coordinator's lock.
  void Notify(const std::string& job_id);

  // Runs `task` on a blocking-read thread.
  void RunBlocking(std::function<void()> task);
  // Calls stream->Wake() after `delay` (if the stream still exists).
  void WakeAfter(absl::Duration delay, std::weak_ptr<Wakeable> stream);

  // Open streams of every user (for tests and metrics).
  int open_streams() const;

  // How an open stream learns that its caller's token stopped being accepted (expired, or
  // revoked by a reload of the tokens file): `check` answers for a principal. Set it before the
  // first stream opens; unset, every stream stays valid.
  void SetValidator(std::function<absl::Status(const Principal&)> check);
  // `check` of the validator; OK without one.
  [[nodiscard]] absl::Status Validate(const Principal& who) const;

 private:
  struct Subscription {
    std::string job_id;
    std::weak_ptr<Wakeable> stream;
  };
  void Dispatch();
  void Work();
  void WakeAll(const std::vector<std::weak_ptr<Wakeable>>& streams);

  const StreamLimits limits_;
  std::function<absl::Status(const Principal&)> validator_;  // Set before the first stream.
  mutable std::mutex mu_;
  std::condition_variable dispatch_cv_;
  std::condition_variable work_cv_;
  bool stopping_ = false;
  std::map<std::string, int> open_;  // user -> open streams
  int total_open_ = 0;
  int64_t next_id_ = 0;
  std::map<int64_t, Subscription> subscriptions_;
  std::multimap<std::string, int64_t> by_job_;
  std::set<std::string> changed_;  // job ids to wake; "" = all
  std::multimap<absl::Time, std::weak_ptr<Wakeable>> timers_;
  std::deque<std::function<void()>> work_;
  int idle_workers_ = 0;
  std::thread dispatcher_;
  std::vector<std::thread> workers_;
};

}  // namespace deepnet::coordinator
