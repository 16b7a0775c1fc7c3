// The divergence guard under the service: a trainer whose loss keeps going NaN (forced with the
// DEEPNET_GUARD_FAULT test facility) is rolled back once, then its guard gives up; the job ends
// FAILED with the guard's reason, is not restarted, and WatchJob shows both guard events.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "tests/integration/service_cluster.h"

namespace deepnet::testing {
namespace {

using ::testing::HasSubstr;

std::string DivergingJob(const std::string& checkpoint_dir) {
  std::ostringstream y;
  y << "name: guard-test\n"
       "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn_dim: 32, "
       "max_positions: 64}\n"
       "data: {synthetic: {languages: [rev], pairs_per_language: 100, max_words: 4}, "
       "max_tokens: 200, max_len: 50, prefetch: 2}\n"
       "optim: {warmup_steps: 4}\n"
       "train: {max_steps: 20, log_every: 1, probe_every: 0}\n"
    << "checkpoint: {dir: " << checkpoint_dir << ", every_steps: 3}\n"
    << "runtime: {blas_threads: 1}\n"
       "guard: {max_retries: 1, loss_window: 3}\n"
       "scheduling: {max_restarts: 3}\n";
  return y.str();
}

TEST(GuardServiceTest, ExhaustedGuardFailsTheJobWithItsReasonAndWatchJobShowsTheEvents) {
  ServiceCluster cluster;
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.Log("coordinator.1.log");
  cluster.StartWorker("w1", 1, {}, {"DEEPNET_GUARD_FAULT=nan@5.."});
  std::unique_ptr<v1::JobService::Stub> jobs = cluster.Jobs();
  v1::SubmitJobRequest request;
  request.mutable_spec()->set_config_yaml(DivergingJob(cluster.UserDir("alice") + "/ckpt"));
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
    const grpc::Status s = jobs->SubmitJob(&context, request, &submitted);
    ASSERT_TRUE(s.ok()) << rpc::Describe(s);
  }
  const std::string id = submitted.job().job_id();
  auto state = [&] { return GetJobAs(*jobs, id).state(); };
  ASSERT_TRUE(
      WaitFor([&] { return state() == v1::JOB_STATE_FAILED || state() == v1::JOB_STATE_SUCCEEDED; },
              std::chrono::seconds(240)))
      << v1::JobState_Name(state()) << "\n"
      << cluster.Log("coordinator.1.log");
  const v1::Job job = GetJobAs(*jobs, id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.attempt(), 1);  // Not restarted, whatever scheduling.max_restarts says.
  EXPECT_THAT(job.message(), HasSubstr("retries exhausted (1 of 1 rollbacks used)"));
  EXPECT_THAT(job.message(), HasSubstr("divergence guard: not restarted"));

  std::vector<v1::JobEvent> events;
  {
    v1::WatchJobRequest watch;
    watch.set_job_id(id);
    watch.set_from_sequence(1);
    grpc::ClientContext context;
    rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
    auto reader = jobs->WatchJob(&context, watch);
    v1::WatchJobResponse item;
    while (reader->Read(&item)) {
      if (item.has_event()) events.push_back(item.event());
    }
  }
  int rollbacks = 0, failures = 0;
  for (const v1::JobEvent& e : events) {
    if (e.type() == v1::JOB_EVENT_TYPE_GUARD_ROLLBACK) {
      ++rollbacks;
      EXPECT_EQ(e.guard_trigger(), "nonfinite_loss");
      EXPECT_EQ(e.guard_to_step(), 3);
      EXPECT_EQ(e.guard_retries(), 1);
      EXPECT_THAT(e.message(), HasSubstr("rolled back to step 3"));
    }
    if (e.type() == v1::JOB_EVENT_TYPE_GUARD_FAILED) {
      ++failures;
      EXPECT_THAT(e.message(), HasSubstr("retries exhausted"));
    }
  }
  EXPECT_EQ(rollbacks, 1);
  EXPECT_EQ(failures, 1);
  // (The job's per-job series, deepnet_job_guard_rollbacks_total included, leave /metrics when
  // it ends; coordinator_guard_test checks them.)
}

}  // namespace
}  // namespace deepnet::testing
