#include "coordinator/core/coordinator_metrics.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/loopback.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<CoordinatorMetrics> MakeMetrics(const std::string& address = "",
                                                size_t max_jobs = 1000) {
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> metrics =
      CoordinatorMetrics::Create(address, max_jobs);
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  return metrics.ok() ? std::move(*metrics) : nullptr;
}

TrainingSample Sample(int64_t step) {
  TrainingSample sample;
  sample.step = step;
  sample.loss = 2.5;
  sample.tokens_per_s = 1234;
  sample.lr = 0.0005;
  sample.grad_norm = 0.75;
  sample.update_norm = 0.125;
  sample.memory_bytes = 4096;
  return sample;
}

using deepnet::testing::HttpGetResponse;

TEST(CoordinatorMetricsTest, ExportsEveryStateIncludingZero) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  EXPECT_EQ(metrics->port(), 0);
  metrics->SetJobsByState({{JobState::kQueued, 7}, {JobState::kRunning, 2}});
  metrics->SetWorkersByState({{WorkerState::kReady, 3}});
  const std::string text = metrics->Serialize();
  EXPECT_THAT(text, HasSubstr("deepnet_jobs{state=\"queued\"} 7"));
  EXPECT_THAT(text, HasSubstr("deepnet_jobs{state=\"running\"} 2"));
  for (const char* state :
       {"placing", "starting", "recovering", "succeeded", "failed", "cancelled"}) {
    EXPECT_THAT(text, HasSubstr("deepnet_jobs{state=\"" + std::string(state) + "\"} 0"));
  }
  EXPECT_THAT(text, HasSubstr("deepnet_workers{state=\"ready\"} 3"));
  EXPECT_THAT(text, HasSubstr("deepnet_workers{state=\"draining\"} 0"));
  EXPECT_THAT(text, HasSubstr("deepnet_workers{state=\"lost\"} 0"));

  // A state missing from a later update goes back to 0.
  metrics->SetJobsByState({{JobState::kRunning, 1}});
  EXPECT_THAT(metrics->Serialize(), HasSubstr("deepnet_jobs{state=\"queued\"} 0"));
}

TEST(CoordinatorMetricsTest, ExportsEveryPendingReasonIncludingZero) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  std::string text = metrics->Serialize();
  for (const char* reason :
       {"schedulable", "insufficient_slots", "behind_job", "exceeds_registered"}) {
    EXPECT_THAT(text, HasSubstr("deepnet_jobs_pending{reason=\"" + std::string(reason) + "\"} 0"));
  }
  metrics->SetJobsPending({{PendingCode::kExceedsRegistered, 2}});
  EXPECT_THAT(metrics->Serialize(),
              HasSubstr("deepnet_jobs_pending{reason=\"exceeds_registered\"} 2"));
  metrics->SetJobsPending({{PendingCode::kBehindJob, 1}});
  text = metrics->Serialize();
  EXPECT_THAT(text, HasSubstr("deepnet_jobs_pending{reason=\"exceeds_registered\"} 0"));
  EXPECT_THAT(text, HasSubstr("deepnet_jobs_pending{reason=\"behind_job\"} 1"));
}

TEST(CoordinatorMetricsTest, CountersAndHistogramsAppear) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  metrics->IncJobsSubmitted();
  metrics->IncJobsSubmitted();
  metrics->IncHeartbeatsMissed(3);
  metrics->IncRestarts(RecoveryCause::kWorkerExit);
  metrics->IncRestarts(RecoveryCause::kStartTimeout);
  metrics->IncRestarts(RecoveryCause::kStartTimeout);
  metrics->ObserveQueueWait(42);
  metrics->ObserveTimeToRunning(7200);
  metrics->ObserveSchedulingDecision(0.0002);
  const std::string text = metrics->Serialize();
  EXPECT_THAT(text, HasSubstr("deepnet_jobs_submitted_total 2"));
  EXPECT_THAT(text, HasSubstr("deepnet_worker_heartbeats_missed_total 3"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_restarts_total{cause=\"worker_exit\"} 1"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_restarts_total{cause=\"start_timeout\"} 2"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_restarts_total{cause=\"worker_lost\"} 0"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_restarts_total{cause=\"hang\"} 0"));
  EXPECT_THAT(text, HasSubstr("# TYPE deepnet_job_queue_wait_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_queue_wait_seconds_sum 42"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_queue_wait_seconds_bucket{le=\"30\"} 0"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_queue_wait_seconds_bucket{le=\"60\"} 1"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_time_to_running_seconds_bucket{le=\"3600\"} 0"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_time_to_running_seconds_bucket{le=\"7200\"} 1"));
  EXPECT_THAT(text, HasSubstr("deepnet_scheduler_decision_seconds_bucket{le=\"0.0001\"} 0"));
  EXPECT_THAT(text, HasSubstr("deepnet_scheduler_decision_seconds_bucket{le=\"0.00025\"} 1"));
  EXPECT_THAT(text, HasSubstr("deepnet_scheduler_decision_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("# HELP deepnet_jobs_submitted_total "));
}

TEST(CoordinatorMetricsTest, GpuMemorySeriesOnlyForGpuJobs) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  TrainingSample gpu = Sample(5);
  gpu.gpu_memory = TrainingSample::GpuMemory{1024, 4096, 2048};
  metrics->SetJobTraining("j-gpu", gpu);
  metrics->SetJobTraining("j-cpu", Sample(5));
  std::string text = metrics->Serialize();
  EXPECT_THAT(text,
              HasSubstr("deepnet_job_gpu_memory_bytes{job=\"j-gpu\",kind=\"allocated\"} 1024"));
  EXPECT_THAT(text,
              HasSubstr("deepnet_job_gpu_memory_bytes{job=\"j-gpu\",kind=\"reserved\"} 4096"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_gpu_memory_bytes{job=\"j-gpu\",kind=\"peak\"} 2048"));
  EXPECT_THAT(text, Not(HasSubstr("deepnet_job_gpu_memory_bytes{job=\"j-cpu\"")));
  metrics->RemoveJob("j-gpu");
  EXPECT_THAT(metrics->Serialize(), Not(HasSubstr("j-gpu")));
}

TEST(CoordinatorMetricsTest, PerJobGaugesAndRemoveJob) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  metrics->SetJobTraining("j-000001", Sample(100));
  TrainingSample other = Sample(7);
  other.update_norm.reset();
  metrics->SetJobTraining("j-000002", other);
  std::string text = metrics->Serialize();
  EXPECT_THAT(text, HasSubstr("deepnet_job_step{job=\"j-000001\"} 100"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_loss{job=\"j-000001\"} 2.5"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_tokens_per_second{job=\"j-000001\"} 1234"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_learning_rate{job=\"j-000001\"} 0.0005"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_gradient_norm{job=\"j-000001\"} 0.75"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_update_norm{job=\"j-000001\"} 0.125"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_memory_bytes{job=\"j-000001\"} 4096"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_step{job=\"j-000002\"} 7"));
  // No update norm reported: no series rather than a fake 0.
  EXPECT_THAT(text, Not(HasSubstr("deepnet_job_update_norm{job=\"j-000002\"}")));

  metrics->SetJobTraining("j-000001", Sample(101));
  EXPECT_THAT(metrics->Serialize(), HasSubstr("deepnet_job_step{job=\"j-000001\"} 101"));

  metrics->RemoveJob("j-000001");
  metrics->RemoveJob("j-unknown");  // No-op.
  text = metrics->Serialize();
  EXPECT_THAT(text, Not(HasSubstr("j-000001")));
  EXPECT_THAT(text, HasSubstr("deepnet_job_step{job=\"j-000002\"} 7"));
  EXPECT_EQ(metrics->num_job_series(), 1u);
}

TEST(CoordinatorMetricsTest, BoundsPerJobSeriesDroppingLeastRecentlyReported) {
  auto metrics = MakeMetrics("", /*max_jobs=*/2);
  ASSERT_NE(metrics, nullptr);
  metrics->SetJobTraining("j-a", Sample(1));
  metrics->SetJobTraining("j-b", Sample(1));
  metrics->SetJobTraining("j-a", Sample(2));  // j-b is now the least recently reported.
  metrics->SetJobTraining("j-c", Sample(1));
  EXPECT_EQ(metrics->num_job_series(), 2u);
  const std::string text = metrics->Serialize();
  EXPECT_THAT(text, HasSubstr("deepnet_job_step{job=\"j-a\"} 2"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_step{job=\"j-c\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("j-b")));
}

TEST(CoordinatorMetricsTest, ConcurrentUpdatesKeepEveryJob) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < 200; ++i) {
        metrics->SetJobTraining("j-" + std::to_string(t) + "-" + std::to_string(i % 10), Sample(i));
        metrics->IncJobsSubmitted();
        if (i % 50 == 0) metrics->Serialize();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(metrics->num_job_series(), 40u);
  EXPECT_THAT(metrics->Serialize(), HasSubstr("deepnet_jobs_submitted_total 800"));
}

TEST(CoordinatorMetricsTest, ServesMetricsOverHttpOnRunTimePortAndRefusesABusyPort) {
  auto metrics = MakeMetrics("127.0.0.1:0");
  ASSERT_NE(metrics, nullptr);
  ASSERT_GT(metrics->port(), 0);
  metrics->SetJobTraining("j-000042", Sample(5));
  metrics->IncJobsSubmitted();
  const std::string response = HttpGetResponse(metrics->port(), "/metrics");
  EXPECT_THAT(response, HasSubstr("200 OK"));
  EXPECT_THAT(response, HasSubstr("text/plain"));
  EXPECT_THAT(response, HasSubstr("deepnet_job_step{job=\"j-000042\"} 5"));
  EXPECT_THAT(response, HasSubstr("deepnet_jobs_submitted_total 1"));

  // The port is taken now. (One test for both: stopping a server takes civetweb ~2 s.)
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> second =
      CoordinatorMetrics::Create("127.0.0.1:" + std::to_string(metrics->port()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("--metrics-listen"));
}

TEST(CoordinatorMetricsTest, RejectsMalformedAddressNamingTheFlag) {
  for (const char* address : {"9464", "localhost:port", ":9464", "0.0.0.0:70000"}) {
    absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> metrics =
        CoordinatorMetrics::Create(address);
    ASSERT_FALSE(metrics.ok()) << address;
    EXPECT_EQ(metrics.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_THAT(metrics.status().message(), HasSubstr("--metrics-listen")) << address;
  }
}

}  // namespace
}  // namespace deepnet::coordinator
