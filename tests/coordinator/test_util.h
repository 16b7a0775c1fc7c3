#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <tuple>

#include "coordinator/store/job_store.h"

namespace deepnet::coordinator::testing {

// A unique temporary folder, removed with everything in it when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "deepnet-coord-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A clock that moves only when told to; safe for concurrent use.
class FakeClock {
 public:
  int64_t Now() const { return now_ms_.load(); }
  void Advance(int64_t ms) { now_ms_ += ms; }
  std::function<int64_t()> AsFunction() {
    return [this] { return Now(); };
  }

 private:
  std::atomic<int64_t> now_ms_{1'700'000'000'000};
};

inline auto Fields(const JobRecord& r) {
  return std::tie(r.id, r.owner, r.idempotency_key, r.spec_yaml, r.name, r.priority,
                  r.pipeline_stages, r.data_parallel, r.state, r.state_reason,
                  r.last_recovery_cause, r.restarts, r.max_restarts, r.attempt, r.created_ms,
                  r.updated_ms, r.last_step, r.checkpoint_dir, r.version);
}

inline bool SameRecord(const JobRecord& a, const JobRecord& b) { return Fields(a) == Fields(b); }

inline bool SameEvent(const JobEvent& a, const JobEvent& b) {
  return std::tie(a.job_id, a.seq, a.time_ms, a.kind, a.message) ==
         std::tie(b.job_id, b.seq, b.time_ms, b.kind, b.message);
}

// A valid job request for `owner`.
inline JobRecord NewJob(const std::string& owner, const std::string& key = "") {
  JobRecord r;
  r.owner = owner;
  r.idempotency_key = key;
  r.name = "wmt-deepnet";
  r.spec_yaml = "model:\n  encoder_layers: 200\nparallel:\n  pipeline_stages: 2\n";
  r.priority = 5;
  r.pipeline_stages = 2;
  r.data_parallel = 3;
  r.max_restarts = 2;
  r.state_reason = "waiting for 6 free slots";
  return r;
}

}  // namespace deepnet::coordinator::testing
