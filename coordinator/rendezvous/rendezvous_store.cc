#include "coordinator/rendezvous/rendezvous_store.h"

#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace deepnet::coordinator {

std::string ToString(const RendezvousScope& scope) {
  return absl::StrCat("job '", scope.job_id, "' attempt ", scope.attempt);
}

namespace {

std::string QuoteKeys(const std::vector<std::string>& keys) {
  return absl::StrCat("'", absl::StrJoin(keys, "', '"), "'");
}

absl::Status ShutDownError() { return absl::UnavailableError("rendezvous store is shutting down"); }

}  // namespace

RendezvousStore::RendezvousStore(const RendezvousStoreOptions& options)
    : options_(options), timer_([this] { TimerLoop(); }) {}

RendezvousStore::~RendezvousStore() {
  Shutdown();
  timer_.join();
}

absl::Status RendezvousStore::OpenAttempt(const RendezvousScope& scope) {
  if (scope.job_id.empty()) return absl::InvalidArgumentError("rendezvous scope: empty job id");
  if (scope.attempt < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous scope of ", ToString(scope), ": negative attempt"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return ShutDownError();
  scopes_.try_emplace(scope);
  return absl::OkStatus();
}

bool RendezvousStore::DropAttempt(const RendezvousScope& scope) {
  std::vector<Completion> completions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = scopes_.find(scope);
    if (it == scopes_.end()) return false;
    const std::set<WaiterId> waiters = it->second.waiters;
    for (WaiterId id : waiters) {
      completions.emplace_back(
          RemoveWaiter(id), absl::AbortedError(absl::StrCat("rendezvous of ", ToString(scope),
                                                            " was dropped (the attempt ended)")));
    }
    scopes_.erase(it);
  }
  Deliver(completions);
  return true;
}

void RendezvousStore::Shutdown() {
  std::vector<Completion> completions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    while (!waiters_.empty()) {
      completions.emplace_back(RemoveWaiter(waiters_.begin()->first), ShutDownError());
    }
    scopes_.clear();
  }
  timer_cv_.notify_all();
  Deliver(completions);
}

absl::StatusOr<RendezvousStore::Scope*> RendezvousStore::FindScope(const RendezvousScope& scope) {
  if (shut_down_) return ShutDownError();
  auto it = scopes_.find(scope);
  if (it == scopes_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no open rendezvous for ", ToString(scope),
                     " (the attempt has not started or has already ended)"));
  }
  return &it->second;
}

absl::Status RendezvousStore::CheckValue(const RendezvousScope& scope, const std::string& key,
                                         size_t value_size) const {
  if (key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous of ", ToString(scope), ": empty key"));
  }
  if (options_.max_key_bytes > 0 && key.size() > options_.max_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous of ", ToString(scope), ": key of ",
                                                   key.size(), " bytes exceeds the limit of ",
                                                   options_.max_key_bytes));
  }
  if (options_.max_value_bytes > 0 && value_size > options_.max_value_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous key '", key, "' of ", ToString(scope), ": value of ", value_size,
                     " bytes exceeds the limit of ", options_.max_value_bytes));
  }
  return absl::OkStatus();
}

absl::Status RendezvousStore::Put(const RendezvousScope& scope, Scope& s, const std::string& key,
                                  std::string value) const {
  auto it = s.values.find(key);
  if (it == s.values.end() && options_.max_keys_per_scope > 0 &&
      s.values.size() >= options_.max_keys_per_scope) {
    return absl::ResourceExhaustedError(absl::StrCat("rendezvous of ", ToString(scope),
                                                     " holds the maximum of ",
                                                     options_.max_keys_per_scope, " keys"));
  }
  const size_t freed = it == s.values.end() ? 0 : key.size() + it->second.size();
  const size_t bytes = s.bytes - freed + key.size() + value.size();
  if (options_.max_bytes_per_scope > 0 && bytes > options_.max_bytes_per_scope) {
    return absl::ResourceExhaustedError(
        absl::StrCat("rendezvous of ", ToString(scope), ": storing key '", key, "' would hold ",
                     bytes, " bytes, over the limit of ", options_.max_bytes_per_scope));
  }
  s.bytes = bytes;
  s.values.insert_or_assign(key, std::move(value));
  return absl::OkStatus();
}

absl::Status RendezvousStore::Set(const RendezvousScope& scope, const std::string& key,
                                  std::string value) {
  if (absl::Status status = CheckValue(scope, key, value.size()); !status.ok()) return status;
  std::vector<Completion> completions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Scope*> found = FindScope(scope);
    if (!found.ok()) return found.status();
    Scope& s = **found;
    if (absl::Status put = Put(scope, s, key, std::move(value)); !put.ok()) return put;
    CollectReady(s, completions);
  }
  Deliver(completions);
  return absl::OkStatus();
}

absl::StatusOr<std::string> RendezvousStore::Get(const RendezvousScope& scope,
                                                 const std::string& key,
                                                 Clock::time_point deadline) {
  absl::StatusOr<std::vector<std::string>> values = absl::UnknownError("not completed");
  bool done = false;
  std::mutex done_mu;
  std::condition_variable done_cv;
  WaiterId id = 0;
  WaitAsync(
      scope, {key}, deadline,
      [&](absl::StatusOr<std::vector<std::string>> result) {
        std::lock_guard<std::mutex> lock(done_mu);
        values = std::move(result);
        done = true;
        done_cv.notify_all();
      },
      &id);
  std::unique_lock<std::mutex> lock(done_mu);
  // The store always completes the wait: at the deadline at the latest (its timer thread).
  done_cv.wait(lock, [&] { return done; });
  if (!values.ok()) return values.status();
  return std::move(values->front());
}

absl::Status RendezvousStore::Wait(const RendezvousScope& scope,
                                   const std::vector<std::string>& keys,
                                   Clock::time_point deadline) {
  absl::Status status = absl::UnknownError("not completed");
  bool done = false;
  std::mutex done_mu;
  std::condition_variable done_cv;
  WaiterId id = 0;
  WaitAsync(
      scope, keys, deadline,
      [&](absl::StatusOr<std::vector<std::string>> result) {
        std::lock_guard<std::mutex> lock(done_mu);
        status = result.status();
        done = true;
        done_cv.notify_all();
      },
      &id);
  std::unique_lock<std::mutex> lock(done_mu);
  done_cv.wait(lock, [&] { return done; });
  return status;
}

absl::StatusOr<int64_t> RendezvousStore::Add(const RendezvousScope& scope, const std::string& key,
                                             int64_t delta) {
  if (absl::Status status = CheckValue(scope, key, 0); !status.ok()) return status;
  std::vector<Completion> completions;
  int64_t sum = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Scope*> found = FindScope(scope);
    if (!found.ok()) return found.status();
    Scope& s = **found;
    auto it = s.values.find(key);
    int64_t current = 0;
    if (it != s.values.end() && !absl::SimpleAtoi(it->second, &current)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous add on key '", key, "' of ", ToString(scope), ": its value (",
                       it->second.size(), " bytes) is not a decimal integer"));
    }
    if ((delta > 0 && current > std::numeric_limits<int64_t>::max() - delta) ||
        (delta < 0 && current < std::numeric_limits<int64_t>::min() - delta)) {
      return absl::OutOfRangeError(absl::StrCat("rendezvous add on key '", key, "' of ",
                                                ToString(scope), ": ", current, " + ", delta,
                                                " overflows int64"));
    }
    sum = current + delta;
    if (absl::Status put = Put(scope, s, key, absl::StrCat(sum)); !put.ok()) return put;
    CollectReady(s, completions);
  }
  Deliver(completions);
  return sum;
}

absl::StatusOr<bool> RendezvousStore::Check(const RendezvousScope& scope,
                                            const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Scope*> found = FindScope(scope);
  if (!found.ok()) return found.status();
  for (const std::string& key : keys) {
    if ((*found)->values.count(key) == 0) return false;
  }
  return true;
}

absl::StatusOr<bool> RendezvousStore::Delete(const RendezvousScope& scope, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Scope*> found = FindScope(scope);
  if (!found.ok()) return found.status();
  Scope& s = **found;
  auto it = s.values.find(key);
  if (it == s.values.end()) return false;
  s.bytes -= key.size() + it->second.size();
  s.values.erase(it);
  return true;
}

absl::StatusOr<CompareSetResult> RendezvousStore::CompareSet(const RendezvousScope& scope,
                                                             const std::string& key,
                                                             std::optional<std::string> expected,
                                                             std::string desired) {
  if (absl::Status status = CheckValue(scope, key, desired.size()); !status.ok()) return status;
  std::vector<Completion> completions;
  CompareSetResult result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Scope*> found = FindScope(scope);
    if (!found.ok()) return found.status();
    Scope& s = **found;
    auto it = s.values.find(key);
    const bool matches = it == s.values.end() ? !expected.has_value()
                                              : expected.has_value() && *expected == it->second;
    if (matches) {
      if (absl::Status put = Put(scope, s, key, std::move(desired)); !put.ok()) return put;
      it = s.values.find(key);
      result.swapped = true;
      CollectReady(s, completions);
    }
    if (it != s.values.end()) result.value = it->second;
  }
  Deliver(completions);
  return result;
}

absl::StatusOr<int64_t> RendezvousStore::NumKeys(const RendezvousScope& scope) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Scope*> found = FindScope(scope);
  if (!found.ok()) return found.status();
  return static_cast<int64_t>((*found)->values.size());
}

void RendezvousStore::WaitAsync(const RendezvousScope& scope, std::vector<std::string> keys,
                                Clock::time_point deadline, WaitCallback done, WaiterId* id) {
  *id = 0;
  absl::StatusOr<std::vector<std::string>> immediate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<Scope*> found = FindScope(scope);
    if (!found.ok()) {
      immediate = found.status();
    } else {
      Scope& s = **found;
      std::vector<std::string> values;
      std::vector<std::string> missing;
      for (const std::string& key : keys) {
        auto it = s.values.find(key);
        if (it == s.values.end()) {
          missing.push_back(key);
        } else {
          values.push_back(it->second);
        }
      }
      if (missing.empty()) {
        immediate = std::move(values);
      } else if (Clock::now() >= deadline) {
        immediate =
            absl::DeadlineExceededError(absl::StrCat("rendezvous of ", ToString(scope), ": key(s) ",
                                                     QuoteKeys(missing), " not set in time"));
      } else if (options_.max_waiters > 0 && waiters_.size() >= options_.max_waiters) {
        immediate = absl::ResourceExhaustedError(absl::StrCat(
            "rendezvous store: ", waiters_.size(), " calls are waiting already (the maximum)"));
      } else if (options_.max_waiters_per_scope > 0 &&
                 s.waiters.size() >= options_.max_waiters_per_scope) {
        immediate = absl::ResourceExhaustedError(
            absl::StrCat("rendezvous of ", ToString(scope), ": ", s.waiters.size(),
                         " calls are waiting already (the maximum per attempt)"));
      } else {
        const WaiterId new_id = next_waiter_id_++;
        const bool earliest = deadlines_.empty() || deadline < deadlines_.begin()->first;
        auto deadline_it = deadlines_.emplace(deadline, new_id);
        waiters_.emplace(new_id,
                         Waiter{scope, std::move(keys), deadline, std::move(done), deadline_it});
        s.waiters.insert(new_id);
        *id = new_id;
        if (earliest) timer_cv_.notify_all();
        return;
      }
    }
  }
  done(std::move(immediate));
}

bool RendezvousStore::CancelWait(WaiterId id, const std::string& reason) {
  WaitCallback done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (id == 0 || waiters_.count(id) == 0) return false;
    done = RemoveWaiter(id);
  }
  done(absl::CancelledError(reason));
  return true;
}

size_t RendezvousStore::num_scopes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return scopes_.size();
}

size_t RendezvousStore::num_waiters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiters_.size();
}

void RendezvousStore::CollectReady(Scope& scope, std::vector<Completion>& out) {
  std::vector<WaiterId> ready;
  for (WaiterId id : scope.waiters) {
    const Waiter& waiter = waiters_.at(id);
    bool all = true;
    for (const std::string& key : waiter.keys) {
      if (scope.values.count(key) == 0) {
        all = false;
        break;
      }
    }
    if (all) ready.push_back(id);
  }
  for (WaiterId id : ready) {
    std::vector<std::string> values;
    for (const std::string& key : waiters_.at(id).keys) values.push_back(scope.values.at(key));
    out.emplace_back(RemoveWaiter(id), std::move(values));
  }
}

RendezvousStore::WaitCallback RendezvousStore::RemoveWaiter(WaiterId id) {
  auto it = waiters_.find(id);
  Waiter& waiter = it->second;
  deadlines_.erase(waiter.deadline_it);
  auto scope_it = scopes_.find(waiter.scope);
  if (scope_it != scopes_.end()) scope_it->second.waiters.erase(id);
  WaitCallback done = std::move(waiter.done);
  waiters_.erase(it);
  return done;
}

void RendezvousStore::Deliver(std::vector<Completion>& completions) {
  for (Completion& completion : completions) completion.first(std::move(completion.second));
}

void RendezvousStore::TimerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shut_down_) {
    if (deadlines_.empty()) {
      timer_cv_.wait(lock);
      continue;
    }
    const Clock::time_point earliest = deadlines_.begin()->first;
    if (Clock::now() < earliest) {
      timer_cv_.wait_until(lock, earliest);
      continue;
    }
    std::vector<Completion> expired;
    const Clock::time_point now = Clock::now();
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      const WaiterId id = deadlines_.begin()->second;
      const Waiter& waiter = waiters_.at(id);
      std::vector<std::string> missing;
      const Scope& scope = scopes_.at(waiter.scope);
      for (const std::string& key : waiter.keys) {
        if (scope.values.count(key) == 0) missing.push_back(key);
      }
      absl::Status status = absl::DeadlineExceededError(
          absl::StrCat("rendezvous of ", ToString(waiter.scope), ": key(s) ", QuoteKeys(missing),
                       " not set in time"));
      expired.emplace_back(RemoveWaiter(id), std::move(status));
    }
    lock.unlock();
    Deliver(expired);
    lock.lock();
  }
}

}  // namespace deepnet::coordinator
