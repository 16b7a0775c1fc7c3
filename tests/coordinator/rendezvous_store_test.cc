#include "coordinator/rendezvous/rendezvous_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;
using Clock = RendezvousStore::Clock;
using std::chrono::milliseconds;

// Generous bound for "a blocked call returns" (liveness, not performance).
constexpr auto kStoreLiveness = std::chrono::seconds(30);

Clock::time_point In(milliseconds ms) { return Clock::now() + ms; }

class RendezvousStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(store_.OpenAttempt(scope_).ok()); }

  RendezvousStore store_;
  const RendezvousScope scope_{"job-1", 1};
};

TEST_F(RendezvousStoreTest, SetThenGetReturnsTheValue) {
  ASSERT_TRUE(store_.Set(scope_, "addr/0", std::string("10.0.0.1:7\0x", 12)).ok());
  absl::StatusOr<std::string> value = store_.Get(scope_, "addr/0", In(milliseconds(0)));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, std::string("10.0.0.1:7\0x", 12));  // Binary-safe.
  ASSERT_TRUE(store_.Set(scope_, "addr/0", "replaced").ok());
  EXPECT_EQ(*store_.Get(scope_, "addr/0", In(milliseconds(0))), "replaced");
  EXPECT_EQ(*store_.NumKeys(scope_), 1);
}

TEST_F(RendezvousStoreTest, BlockedGetIsReleasedByALaterSet) {
  auto getter = std::async(
      std::launch::async, [&] { return store_.Get(scope_, "late", In(std::chrono::seconds(60))); });
  // Set only once the Get is really waiting, so the test covers the wake-up path.
  while (store_.num_waiters() == 0) std::this_thread::yield();
  ASSERT_TRUE(store_.Set(scope_, "late", "v").ok());
  ASSERT_EQ(getter.wait_for(kStoreLiveness), std::future_status::ready);
  absl::StatusOr<std::string> value = getter.get();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "v");
  EXPECT_EQ(store_.num_waiters(), 0u);
}

TEST_F(RendezvousStoreTest, GetOfAMissingKeyTimesOutNamingTheKey) {
  const auto start = Clock::now();
  absl::StatusOr<std::string> value = store_.Get(scope_, "never", In(milliseconds(50)));
  EXPECT_GE(Clock::now() - start, milliseconds(50));
  ASSERT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(value.status().message(), HasSubstr("'never'"));
  EXPECT_THAT(value.status().message(), HasSubstr("job 'job-1' attempt 1"));
  EXPECT_EQ(store_.num_waiters(), 0u);
}

TEST_F(RendezvousStoreTest, WaitNamesOnlyTheMissingKeys) {
  ASSERT_TRUE(store_.Set(scope_, "a", "1").ok());
  absl::Status status = store_.Wait(scope_, {"a", "b"}, In(milliseconds(20)));
  ASSERT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("'b'"));
  EXPECT_THAT(status.message(), ::testing::Not(HasSubstr("'a'")));
  ASSERT_TRUE(store_.Set(scope_, "b", "2").ok());
  EXPECT_TRUE(store_.Wait(scope_, {"a", "b"}, In(milliseconds(0))).ok());
  EXPECT_TRUE(store_.Wait(scope_, {}, In(milliseconds(0))).ok());
}

TEST_F(RendezvousStoreTest, WaitReturnsOnlyWhenEveryKeyExists) {
  auto waiter = std::async(std::launch::async, [&] {
    return store_.Wait(scope_, {"x", "y"}, In(std::chrono::seconds(60)));
  });
  while (store_.num_waiters() == 0) std::this_thread::yield();
  ASSERT_TRUE(store_.Set(scope_, "x", "1").ok());
  EXPECT_EQ(store_.num_waiters(), 1u);  // Still waiting for y.
  ASSERT_TRUE(store_.Add(scope_, "y", 1).ok());
  ASSERT_EQ(waiter.wait_for(kStoreLiveness), std::future_status::ready);
  EXPECT_TRUE(waiter.get().ok());
}

TEST_F(RendezvousStoreTest, EarlierDeadlineRegisteredLaterStillFiresFirst) {
  // The timer thread sleeps until the earliest deadline; a new, earlier one must wake it.
  auto long_wait = std::async(std::launch::async, [&] {
    return store_.Wait(scope_, {"k"}, In(std::chrono::seconds(3600)));
  });
  while (store_.num_waiters() == 0) std::this_thread::yield();
  EXPECT_EQ(store_.Wait(scope_, {"k"}, In(milliseconds(30))).code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(store_.Set(scope_, "k", "v").ok());
  ASSERT_EQ(long_wait.wait_for(kStoreLiveness), std::future_status::ready);
  EXPECT_TRUE(long_wait.get().ok());
}

TEST_F(RendezvousStoreTest, AddIsAtomicUnderThreads) {
  constexpr int kThreads = 8;
  constexpr int kAdds = 500;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) {
        if (!store_.Add(scope_, "counter", 1).ok()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(*store_.Get(scope_, "counter", In(milliseconds(0))), std::to_string(kThreads * kAdds));
  EXPECT_EQ(*store_.Add(scope_, "counter", -kThreads * kAdds), 0);
}

TEST_F(RendezvousStoreTest, AddRejectsNonIntegerValuesAndOverflow) {
  ASSERT_TRUE(store_.Set(scope_, "text", "abc").ok());
  absl::StatusOr<int64_t> sum = store_.Add(scope_, "text", 1);
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sum.status().message(), HasSubstr("'text'"));
  ASSERT_TRUE(store_.Add(scope_, "big", std::numeric_limits<int64_t>::max()).ok());
  EXPECT_EQ(store_.Add(scope_, "big", 1).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(RendezvousStoreTest, AttemptsAreIsolated) {
  const RendezvousScope second{"job-1", 2};
  const RendezvousScope other_job{"job-2", 1};
  ASSERT_TRUE(store_.OpenAttempt(second).ok());
  ASSERT_TRUE(store_.OpenAttempt(other_job).ok());
  ASSERT_TRUE(store_.Set(scope_, "k", "attempt 1").ok());
  ASSERT_TRUE(store_.Set(second, "k", "attempt 2").ok());
  EXPECT_EQ(*store_.Get(scope_, "k", In(milliseconds(0))), "attempt 1");
  EXPECT_EQ(*store_.Get(second, "k", In(milliseconds(0))), "attempt 2");
  EXPECT_FALSE(*store_.Check(other_job, {"k"}));
  EXPECT_EQ(*store_.NumKeys(other_job), 0);
  EXPECT_TRUE(*store_.Delete(second, "k"));
  EXPECT_TRUE(*store_.Check(scope_, {"k"}));
}

TEST_F(RendezvousStoreTest, UnopenedScopeIsRefused) {
  const RendezvousScope stale{"job-1", 7};
  absl::Status status = store_.Set(stale, "k", "v");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("job 'job-1' attempt 7"));
  EXPECT_EQ(store_.Get(stale, "k", In(milliseconds(1000))).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.OpenAttempt({"", 1}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RendezvousStoreTest, DropAttemptFreesKeysAndAbortsWaiters) {
  ASSERT_TRUE(store_.Set(scope_, "k", "v").ok());
  auto getter = std::async(std::launch::async, [&] {
    return store_.Get(scope_, "missing", In(std::chrono::seconds(3600)));
  });
  while (store_.num_waiters() == 0) std::this_thread::yield();
  EXPECT_TRUE(store_.DropAttempt(scope_));
  ASSERT_EQ(getter.wait_for(kStoreLiveness), std::future_status::ready);
  EXPECT_EQ(getter.get().status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(store_.num_scopes(), 0u);
  EXPECT_EQ(store_.num_waiters(), 0u);
  EXPECT_FALSE(store_.DropAttempt(scope_));
  // A stale rank of the dropped attempt cannot write into it again.
  EXPECT_EQ(store_.Set(scope_, "k", "v").code(), absl::StatusCode::kFailedPrecondition);
  // Reopening starts empty.
  ASSERT_TRUE(store_.OpenAttempt(scope_).ok());
  EXPECT_FALSE(*store_.Check(scope_, {"k"}));
}

TEST_F(RendezvousStoreTest, CompareSetSwapsOnlyOnMatch) {
  absl::StatusOr<CompareSetResult> result = store_.CompareSet(scope_, "k", std::nullopt, "first");
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->swapped);
  EXPECT_EQ(result->value, "first");
  result = store_.CompareSet(scope_, "k", std::nullopt, "second");  // Exists: no swap.
  EXPECT_FALSE(result->swapped);
  EXPECT_EQ(result->value, "first");
  result = store_.CompareSet(scope_, "k", std::string("wrong"), "second");
  EXPECT_FALSE(result->swapped);
  EXPECT_EQ(result->value, "first");
  result = store_.CompareSet(scope_, "k", std::string("first"), "second");
  EXPECT_TRUE(result->swapped);
  EXPECT_EQ(result->value, "second");
  result = store_.CompareSet(scope_, "absent", std::string("x"), "y");
  EXPECT_FALSE(result->swapped);
  EXPECT_FALSE(result->value.has_value());
}

TEST_F(RendezvousStoreTest, CancelWaitEndsTheWaitOnce) {
  std::atomic<int> calls{0};
  absl::Status seen;
  RendezvousStore::WaiterId id = 0;
  store_.WaitAsync(
      scope_, {"k"}, In(std::chrono::seconds(3600)),
      [&](absl::StatusOr<std::vector<std::string>> values) {
        seen = values.status();
        ++calls;
      },
      &id);
  ASSERT_NE(id, 0u);
  EXPECT_TRUE(store_.CancelWait(id, "client went away"));
  EXPECT_FALSE(store_.CancelWait(id, "again"));
  ASSERT_TRUE(store_.Set(scope_, "k", "v").ok());
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(seen.code(), absl::StatusCode::kCancelled);
}

TEST_F(RendezvousStoreTest, WaitAsyncCompletesInlineWhenKeysExist) {
  ASSERT_TRUE(store_.Set(scope_, "a", "1").ok());
  ASSERT_TRUE(store_.Set(scope_, "b", "2").ok());
  std::vector<std::string> got;
  RendezvousStore::WaiterId id = 99;
  store_.WaitAsync(
      scope_, {"b", "a"}, In(milliseconds(0)),
      [&](absl::StatusOr<std::vector<std::string>> values) { got = *values; }, &id);
  EXPECT_EQ(id, 0u);
  EXPECT_EQ(got, (std::vector<std::string>{"2", "1"}));
}

TEST_F(RendezvousStoreTest, ShutdownReleasesWaitersAndRefusesRequests) {
  auto getter = std::async(std::launch::async,
                           [&] { return store_.Get(scope_, "k", In(std::chrono::seconds(3600))); });
  while (store_.num_waiters() == 0) std::this_thread::yield();
  store_.Shutdown();
  ASSERT_EQ(getter.wait_for(kStoreLiveness), std::future_status::ready);
  EXPECT_EQ(getter.get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store_.Set(scope_, "k", "v").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store_.OpenAttempt(scope_).code(), absl::StatusCode::kUnavailable);
}

TEST(RendezvousStoreLimitsTest, OversizedValuesAndTooManyKeysAreRefused) {
  RendezvousStoreOptions options;
  options.max_value_bytes = 4;
  options.max_keys_per_scope = 2;
  RendezvousStore store(options);
  const RendezvousScope scope{"j", 0};
  ASSERT_TRUE(store.OpenAttempt(scope).ok());
  EXPECT_EQ(store.Set(scope, "k", "12345").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Set(scope, "", "1").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store.Set(scope, "a", "1").ok());
  ASSERT_TRUE(store.Set(scope, "b", "1").ok());
  ASSERT_TRUE(store.Set(scope, "b", "2").ok());  // Replacing is fine.
  EXPECT_EQ(store.Set(scope, "c", "1").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.Add(scope, "c", 1).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(RendezvousStoreLimitsTest, OneScopeCannotTakeTheMemoryOfTheOthers) {
  RendezvousStoreOptions options;
  options.max_key_bytes = 8;
  options.max_bytes_per_scope = 20;
  RendezvousStore store(options);
  const RendezvousScope greedy{"greedy", 1};
  const RendezvousScope other{"other", 1};
  ASSERT_TRUE(store.OpenAttempt(greedy).ok());
  ASSERT_TRUE(store.OpenAttempt(other).ok());
  EXPECT_EQ(store.Set(greedy, "123456789", "v").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store.Set(greedy, "a", "123456789").ok());  // 10 bytes.
  ASSERT_TRUE(store.Set(greedy, "b", "12345678").ok());   // 19 bytes.
  absl::Status full = store.Set(greedy, "c", "12");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("over the limit of 20"));
  EXPECT_EQ(store.CompareSet(greedy, "c", std::nullopt, "12").status().code(),
            absl::StatusCode::kResourceExhausted);
  // Replacing counts the new size, not both.
  EXPECT_TRUE(store.Set(greedy, "b", "123456789").ok());  // 20 bytes.
  // Deleting frees its bytes.
  ASSERT_TRUE(store.Delete(greedy, "a").value());
  EXPECT_TRUE(store.Set(greedy, "c", "12345").ok());
  // The other scope has its own budget.
  EXPECT_TRUE(store.Set(other, "a", "123456789").ok());
  EXPECT_TRUE(store.Set(other, "b", "12345678").ok());
}

TEST(RendezvousStoreLimitsTest, OneScopeCannotTakeEveryWaiterSlot) {
  RendezvousStoreOptions options;
  options.max_waiters_per_scope = 2;
  RendezvousStore store(options);
  const RendezvousScope greedy{"greedy", 1};
  const RendezvousScope other{"other", 1};
  ASSERT_TRUE(store.OpenAttempt(greedy).ok());
  ASSERT_TRUE(store.OpenAttempt(other).ok());
  std::vector<absl::Status> results;
  std::mutex mu;
  auto record = [&](absl::StatusOr<std::vector<std::string>> r) {
    std::lock_guard<std::mutex> lock(mu);
    results.push_back(r.status());
  };
  RendezvousStore::WaiterId ids[4] = {};
  store.WaitAsync(greedy, {"x"}, In(milliseconds(60000)), record, &ids[0]);
  store.WaitAsync(greedy, {"x"}, In(milliseconds(60000)), record, &ids[1]);
  store.WaitAsync(greedy, {"x"}, In(milliseconds(60000)), record, &ids[2]);
  ASSERT_EQ(ids[2], 0u);  // Refused at once.
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(results[0].message(), HasSubstr("per attempt"));
  }
  store.WaitAsync(other, {"x"}, In(milliseconds(60000)), record, &ids[3]);
  EXPECT_NE(ids[3], 0u);  // Another job still waits.
  EXPECT_EQ(store.num_waiters(), 3u);
  store.Shutdown();
}

}  // namespace
}  // namespace deepnet::coordinator
