#pragma once
// A worker session for coordinator tests that answers log requests from logs held in memory,
// like a deepnet-worker reading its files, on a thread of its own (a WorkerCommandSink must not
// call back into the coordinator). It can be made silent, like a worker that never answers.

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/core/coordinator.h"

namespace deepnet::coordinator::testing {

class LogServingSink : public WorkerCommandSink {
 public:
  struct Log {
    std::string text;
    bool running = false;
  };
  using LogKey = std::tuple<std::string, int, int, LogStream>;  // job, attempt, rank, stream

  LogServingSink(Coordinator* coordinator, std::string worker_id)
      : coordinator_(coordinator), worker_id_(std::move(worker_id)) {
    thread_ = std::thread([this] { Serve(); });
  }
  // Stop() must have been called while the coordinator still exists.
  ~LogServingSink() override { Stop(); }

  void set_epoch(int64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    epoch_ = epoch;
  }
  void SetLog(const LogKey& key, std::string text, bool running) {
    std::lock_guard<std::mutex> lock(mu_);
    logs_[key] = {std::move(text), running};
  }
  void AppendLog(const LogKey& key, const std::string& more, bool running) {
    std::lock_guard<std::mutex> lock(mu_);
    logs_[key].text += more;
    logs_[key].running = running;
  }
  void set_silent(bool silent) {
    std::lock_guard<std::mutex> lock(mu_);
    silent_ = silent;
  }
  // Changes each answer before it is sent (a worker that breaks the LogChunk contract).
  void set_tamper(std::function<void(LogChunkReport&)> tamper) {
    std::lock_guard<std::mutex> lock(mu_);
    tamper_ = std::move(tamper);
  }
  std::vector<LogRequestCommand> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<AssignmentCommand> assignments() {
    std::lock_guard<std::mutex> lock(mu_);
    return assignments_;
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void SendAssignment(int64_t, const AssignmentCommand& command) override {
    std::lock_guard<std::mutex> lock(mu_);
    assignments_.push_back(command);
  }
  void SendCancellation(int64_t, const CancellationCommand&) override {}
  void SendLease(int64_t, int64_t, int64_t) override {}
  void Close(const absl::Status&) override {}
  bool SendLogRequest(int64_t, const LogRequestCommand& command) override {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(command);
    queue_.push_back(command);
    cv_.notify_all();
    return true;
  }

 private:
  // What a worker answers (worker/trainer_log_reader.h semantics, 64 KiB parts).
  LogChunkReport Answer(const LogRequestCommand& r) {
    LogChunkReport chunk;
    chunk.request_id = r.request_id;
    auto it = logs_.find({r.job_id, r.attempt, r.rank, r.stream});
    if (it == logs_.end()) {
      chunk.error = absl::NotFoundError(absl::StrCat("no log of rank ", r.rank));
      return chunk;
    }
    const int64_t size = static_cast<int64_t>(it->second.text.size());
    if (r.tail_bytes <= 0 && r.offset > size) {
      chunk.error = absl::OutOfRangeError(absl::StrCat("offset ", r.offset, " is past the end"));
      return chunk;
    }
    chunk.offset = r.tail_bytes > 0 ? std::max<int64_t>(0, size - r.tail_bytes) : r.offset;
    const int64_t limit = r.max_bytes > 0 ? std::min<int64_t>(r.max_bytes, 65536) : 65536;
    chunk.data = it->second.text.substr(static_cast<size_t>(chunk.offset),
                                        static_cast<size_t>(limit));
    chunk.size = size;
    chunk.running = it->second.running;
    return chunk;
  }

  void Serve() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      const LogRequestCommand request = queue_.front();
      queue_.pop_front();
      if (silent_) continue;
      LogChunkReport chunk = Answer(request);
      if (tamper_) tamper_(chunk);
      const int64_t epoch = epoch_;
      lock.unlock();
      (void)coordinator_->OnLogChunk(worker_id_, epoch, chunk);
      lock.lock();
    }
  }

  Coordinator* const coordinator_;
  const std::string worker_id_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t epoch_ = 0;
  bool silent_ = false;
  std::function<void(LogChunkReport&)> tamper_;
  bool stop_ = false;
  std::map<LogKey, Log> logs_;
  std::deque<LogRequestCommand> queue_;
  std::vector<LogRequestCommand> requests_;
  std::vector<AssignmentCommand> assignments_;
  std::thread thread_;
};

}  // namespace deepnet::coordinator::testing
