// The per-user bucket behind the limits on SubmitJob and CancelJob (issue 25, item 6); the
// service's use of it is in job_service_test.cc (WriteRateServiceTest).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "coordinator/grpc/write_rate_limiter.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;

TEST(WriteRateLimiterTest, ABurstThenTheSustainedRatePerUser) {
  WriteRateLimiter limiter({/*per_second=*/2, /*burst=*/3});
  const auto t0 = WriteRateLimiter::Clock::time_point() + std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Take("alice", t0).ok()) << i;
  const absl::Status refused = limiter.Take("alice", t0);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("user alice"));
  EXPECT_THAT(refused.message(), HasSubstr("try again in 0.50 s"));
  EXPECT_TRUE(limiter.Take("bob", t0).ok()) << "another user's bucket is their own";
  EXPECT_TRUE(limiter.Take("alice", t0 + std::chrono::milliseconds(500)).ok());
  EXPECT_FALSE(limiter.Take("alice", t0 + std::chrono::milliseconds(500)).ok());
  // A long pause refills the bucket to the burst, not beyond.
  const auto later = t0 + std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Take("alice", later).ok()) << i;
  EXPECT_FALSE(limiter.Take("alice", later).ok());
}

TEST(WriteRateLimiterTest, ZeroRateIsNoLimit) {
  WriteRateLimiter limiter({/*per_second=*/0, /*burst=*/1});
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(limiter.Take("alice").ok());
}

}  // namespace
}  // namespace deepnet::coordinator
