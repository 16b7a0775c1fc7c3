#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace deepnet::coordinator {

// The key space of one attempt of one job.
struct RendezvousScope {
  std::string job_id;
  int attempt = 0;

  bool operator<(const RendezvousScope& other) const {
    return job_id != other.job_id ? job_id < other.job_id : attempt < other.attempt;
  }
  bool operator==(const RendezvousScope& other) const {
    return job_id == other.job_id && attempt == other.attempt;
  }
};

// "job 'j' attempt 2", for error messages.
std::string ToString(const RendezvousScope& scope);

struct RendezvousStoreOptions {
  // Largest value in bytes; 0 means unbounded.
  size_t max_value_bytes = 1 << 20;
  // Longest key in bytes; 0 means unbounded.
  size_t max_key_bytes = 4096;
  // Keys one scope may hold; 0 means unbounded.
  size_t max_keys_per_scope = 1 << 16;
  // Bytes of keys and values one scope may hold; 0 means unbounded. With the per-scope waiter
  // cap below, one job's trainers cannot take the memory or the waiter slots of the others.
  size_t max_bytes_per_scope = 64 << 20;
  // Calls blocked in Get/Wait at once, over all scopes; 0 means unbounded.
  size_t max_waiters = 1 << 16;
  // Calls blocked in Get/Wait at once in one scope; 0 means unbounded.
  size_t max_waiters_per_scope = 8192;
};

struct CompareSetResult {
  // Whether the desired value was stored.
  bool swapped = false;
  // The key's value after the call; nullopt when the key does not exist.
  std::optional<std::string> value;
};

/// In-memory key/value store of the rendezvous: one key space per (job id, attempt), with
/// blocking reads that wait for keys to appear, bounded by deadlines. A scope exists between
/// OpenAttempt and DropAttempt; requests for any other scope fail FailedPrecondition, so a
/// stale rank of a finished attempt cannot write into a newer one. Blocked calls end with
/// DeadlineExceeded (naming the missing keys) at their deadline, Aborted when their scope is
/// dropped, Cancelled by CancelWait, and Unavailable at Shutdown. A timer thread owned by the
/// store delivers the deadlines; callbacks run without the store's lock held, on the thread
/// of the call that completed them (Set, Add, CompareSet, DropAttempt, CancelWait, Shutdown,
/// the timer thread, or the caller of WaitAsync itself). Safe for concurrent use.
class RendezvousStore {
 public:
  using Clock = std::chrono::steady_clock;
  // Identifies a pending WaitAsync; 0 means "not pending".
  using WaiterId = uint64_t;
  // Receives the values of the awaited keys (in the order asked), or why the wait failed.
  using WaitCallback = std::function<void(absl::StatusOr<std::vector<std::string>>)>;

  explicit RendezvousStore(const RendezvousStoreOptions& options = {});
  // Shutdown(), then joins the timer thread.
  ~RendezvousStore();
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  // Opens the empty key space of `scope`; OK if it is open already. InvalidArgument for an
  // empty job id or a negative attempt.
  [[nodiscard]] absl::Status OpenAttempt(const RendezvousScope& scope);
  // Frees the keys of `scope` and ends its blocked calls with Aborted; later requests for it
  // fail FailedPrecondition. Returns whether it was open.
  bool DropAttempt(const RendezvousScope& scope);
  // Ends every blocked call with Unavailable and refuses every later request with Unavailable.
  // Idempotent. Call before shutting down a gRPC server whose calls wait here.
  void Shutdown();

  [[nodiscard]] absl::Status Set(const RendezvousScope& scope, const std::string& key,
                                 std::string value);
  // Blocks until `key` exists (returns its value) or `deadline` passes (DeadlineExceeded).
  [[nodiscard]] absl::StatusOr<std::string> Get(const RendezvousScope& scope,
                                                const std::string& key, Clock::time_point deadline);
  // Adds `delta` to the decimal integer at `key` (missing: 0) and returns the sum.
  // InvalidArgument when the value is not a decimal integer, OutOfRange on overflow.
  [[nodiscard]] absl::StatusOr<int64_t> Add(const RendezvousScope& scope, const std::string& key,
                                            int64_t delta);
  // Blocks until every key exists or `deadline` passes (DeadlineExceeded naming the missing).
  [[nodiscard]] absl::Status Wait(const RendezvousScope& scope,
                                  const std::vector<std::string>& keys, Clock::time_point deadline);
  // Whether every key exists now.
  [[nodiscard]] absl::StatusOr<bool> Check(const RendezvousScope& scope,
                                           const std::vector<std::string>& keys);
  // Deletes `key`; returns whether it existed.
  [[nodiscard]] absl::StatusOr<bool> Delete(const RendezvousScope& scope, const std::string& key);
  // Stores `desired` if the value equals `expected` (nullopt: if the key does not exist).
  [[nodiscard]] absl::StatusOr<CompareSetResult> CompareSet(const RendezvousScope& scope,
                                                            const std::string& key,
                                                            std::optional<std::string> expected,
                                                            std::string desired);
  [[nodiscard]] absl::StatusOr<int64_t> NumKeys(const RendezvousScope& scope);

  // Non-blocking form of Wait for reactors: `done` is called exactly once, with the values of
  // `keys` once all exist, or with the error. When the outcome is known at once (keys present,
  // deadline passed, bad scope), `done` runs before WaitAsync returns and *id is set to 0;
  // otherwise *id is set (under the store's lock, before `done` can run on another thread) to
  // a value for CancelWait.
  void WaitAsync(const RendezvousScope& scope, std::vector<std::string> keys,
                 Clock::time_point deadline, WaitCallback done, WaiterId* id);
  // Ends the pending wait `id` with Cancelled(reason), calling its callback on this thread.
  // Returns false (and does nothing) when it is no longer pending.
  bool CancelWait(WaiterId id, const std::string& reason);

  // Open scopes and pending waits, for metrics and tests.
  size_t num_scopes() const;
  size_t num_waiters() const;

 private:
  struct Waiter {
    RendezvousScope scope;
    std::vector<std::string> keys;
    Clock::time_point deadline;
    WaitCallback done;
    std::multimap<Clock::time_point, WaiterId>::iterator deadline_it;
  };
  struct Scope {
    std::unordered_map<std::string, std::string> values;
    std::set<WaiterId> waiters;
    size_t bytes = 0;  // Of every key and value in `values`.
  };
  // A callback and the result to deliver to it once the lock is released.
  using Completion = std::pair<WaitCallback, absl::StatusOr<std::vector<std::string>>>;

  // The open scope, or FailedPrecondition / Unavailable naming it.
  absl::StatusOr<Scope*> FindScope(const RendezvousScope& scope) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckValue(const RendezvousScope& scope, const std::string& key,
                          size_t value_size) const;
  // Stores `value` at `key` in `s`, or ResourceExhausted when the scope's key count or byte
  // budget (options_) would be exceeded.
  absl::Status Put(const RendezvousScope& scope, Scope& s, const std::string& key,
                   std::string value) const;
  // After `scope` gained keys: completes the waiters whose keys now all exist.
  void CollectReady(Scope& scope, std::vector<Completion>& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes waiter `id` (which must exist) and returns its callback.
  WaitCallback RemoveWaiter(WaiterId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Deliver(std::vector<Completion>& completions);
  void TimerLoop();

  const RendezvousStoreOptions options_;
  mutable std::mutex mu_;
  std::condition_variable timer_cv_;  // Wakes the timer thread: new earliest deadline, stop.
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::map<RendezvousScope, Scope> scopes_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<WaiterId, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  std::multimap<Clock::time_point, WaiterId> deadlines_ ABSL_GUARDED_BY(mu_);
  WaiterId next_waiter_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::thread timer_;  // Last member: starts after the state above exists.
};

}  // namespace deepnet::coordinator
