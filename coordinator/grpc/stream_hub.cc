#include "coordinator/grpc/stream_hub.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {

StreamHub::StreamHub(StreamLimits limits) : limits_(limits) {
  dispatcher_ = std::thread([this] { Dispatch(); });
  for (int i = 0; i < std::max(1, limits_.blocking_threads); ++i) {
    workers_.emplace_back([this] { Work(); });
  }
}

StreamHub::~StreamHub() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  dispatch_cv_.notify_all();
  work_cv_.notify_all();
  dispatcher_.join();
  for (std::thread& t : workers_) t.join();
  // Tasks never run hold the last references to finished streams: let them go here, unlocked.
  std::deque<std::function<void()>> left;
  std::multimap<absl::Time, std::weak_ptr<Wakeable>> timers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(work_);
    timers.swap(timers_);
  }
}

absl::Status StreamHub::Acquire(const Principal& who) {
  const bool admin = who.role == Role::kAdmin;
  const int limit = admin ? limits_.per_admin : limits_.per_user;
  std::lock_guard<std::mutex> lock(mu_);
  int& open = open_[who.user];
  if (limit > 0 && open >= limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "user ", who.user, " already has ", limit,
        " open streams (WatchJob, StreamMetrics and GetJobLogs together), the limit for ",
        admin ? "an admin (--max-streams-per-admin)" : "a user (--max-streams-per-user)",
        "; close one first"));
  }
  ++open;
  ++total_open_;
  return absl::OkStatus();
}

void StreamHub::Release(const Principal& who) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(who.user);
  if (it == open_.end()) return;
  if (--it->second <= 0) open_.erase(it);
  --total_open_;
}

int StreamHub::open_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_open_;
}

int64_t StreamHub::Subscribe(const std::string& job_id, std::weak_ptr<Wakeable> stream) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t id = ++next_id_;
  subscriptions_[id] = Subscription{job_id, std::move(stream)};
  by_job_.emplace(job_id, id);
  return id;
}

void StreamHub::Unsubscribe(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = subscriptions_.find(id);
  if (it == subscriptions_.end()) return;
  auto [first, last] = by_job_.equal_range(it->second.job_id);
  for (auto j = first; j != last; ++j) {
    if (j->second == id) {
      by_job_.erase(j);
      break;
    }
  }
  subscriptions_.erase(it);
}

void StreamHub::Notify(const std::string& job_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    changed_.insert(job_id);
  }
  dispatch_cv_.notify_one();
}

void StreamHub::RunBlocking(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    work_.push_back(std::move(task));
    // Every thread is busy (waiting for workers): one more, up to the bound. They stay.
    if (static_cast<int>(work_.size()) > idle_workers_ &&
        static_cast<int>(workers_.size()) < limits_.max_blocking_threads) {
      workers_.emplace_back([this] { Work(); });
    }
  }
  work_cv_.notify_one();
}

void StreamHub::WakeAfter(absl::Duration delay, std::weak_ptr<Wakeable> stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    timers_.emplace(absl::Now() + delay, std::move(stream));
  }
  dispatch_cv_.notify_one();
}

void StreamHub::Dispatch() {
  std::unique_lock<std::mutex> lock(mu_);
  absl::Time next_sweep = absl::Now() + limits_.sweep_interval;
  while (!stopping_) {
    absl::Time until = next_sweep;
    if (!timers_.empty()) until = std::min(until, timers_.begin()->first);
    if (changed_.empty()) {
      const absl::Duration wait = std::max(until - absl::Now(), absl::ZeroDuration());
      dispatch_cv_.wait_for(lock, absl::ToChronoNanoseconds(wait));
      if (stopping_) break;
    }
    const absl::Time now = absl::Now();
    std::vector<std::weak_ptr<Wakeable>> wake;
    if (changed_.count("") > 0 || now >= next_sweep) {
      for (const auto& [id, sub] : subscriptions_) wake.push_back(sub.stream);
      next_sweep = now + limits_.sweep_interval;
    } else {
      for (const std::string& job_id : changed_) {
        auto [first, last] = by_job_.equal_range(job_id);
        for (auto it = first; it != last; ++it) wake.push_back(subscriptions_[it->second].stream);
      }
    }
    changed_.clear();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      wake.push_back(std::move(timers_.begin()->second));
      timers_.erase(timers_.begin());
    }
    if (wake.empty()) continue;
    lock.unlock();
    WakeAll(wake);
    wake.clear();  // the last reference to a finished stream goes here, unlocked
    lock.lock();
  }
}

void StreamHub::WakeAll(const std::vector<std::weak_ptr<Wakeable>>& streams) {
  for (const std::weak_ptr<Wakeable>& weak : streams) {
    if (std::shared_ptr<Wakeable> stream = weak.lock()) stream->Wake();
  }
}

void StreamHub::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_workers_;
    work_cv_.wait(lock, [this] { return stopping_ || !work_.empty(); });
    --idle_workers_;
    if (stopping_) return;
    std::function<void()> task = std::move(work_.front());
    work_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // drop what it holds before taking the lock again
    lock.lock();
  }
}

void StreamHub::SetValidator(std::function<absl::Status(const Principal&)> check) {
  validator_ = std::move(check);
}

absl::Status StreamHub::Validate(const Principal& who) const {
  return validator_ ? validator_(who) : absl::OkStatus();
}

}  // namespace deepnet::coordinator
