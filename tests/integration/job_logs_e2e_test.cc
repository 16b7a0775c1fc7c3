// `deepnetctl logs` end to end: a real deepnet-coordinator and deepnet-worker daemon, and a real
// trainer that fails at start-up; its stderr is read back through JobService.GetJobLogs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cctype>
#include <fstream>

#include "tests/integration/service_cluster.h"

namespace deepnet::testing {
namespace {

using ::testing::HasSubstr;

// A 1x1 job whose training data the trainer cannot read, so that it fails at start-up.
std::string FailingJobYaml(const std::string& missing_tsv) {
  return "name: failing-job\n"
         "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn_dim: 32}\n"
         "data: {source: tsv, train_path: " + missing_tsv + "}\n"
         "train: {max_steps: 5}\n"
         "runtime: {blas_threads: 1}\n"
         "parallel: {pipeline_stages: 1, data_parallel: 1}\n"
         "scheduling: {max_restarts: 0}\n";
}

struct LogsResult {
  grpc::Status status;
  std::string data;
  std::vector<v1::GetJobLogsResponse> responses;
};

LogsResult ReadLogs(v1::JobService::Stub& jobs, const char* token,
                    const v1::GetJobLogsRequest& request) {
  grpc::ClientContext context;
  rpc::PrepareContext(&context, token, std::chrono::seconds(60));
  auto reader = jobs.GetJobLogs(&context, request);
  LogsResult result;
  v1::GetJobLogsResponse response;
  while (reader->Read(&response)) {
    result.data += response.data();
    result.responses.push_back(response);
  }
  result.status = reader->Finish();
  return result;
}

TEST(JobLogsEndToEndTest, OwnerReadsTheFailedTrainersStderrThroughTheCoordinator) {
  ServiceCluster cluster;
  ASSERT_TRUE(cluster.StartCoordinator({"--no-check-paths", "--log-request-timeout-s", "30"}))
      << cluster.Log("coordinator.1.log");
  cluster.StartWorker("node-a", 1);
  auto jobs = cluster.Jobs();
  // Inside the owner's folder, so that both storage checks pass, but unreadable (mode 0000):
  // the trainer, which never runs as root, cannot open it.
  const std::string missing = cluster.UserDir("alice") + "/no-such-train.tsv";
  std::ofstream(missing) << "a\tb\n";
  chmod(missing.c_str(), 0);

  v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_config_yaml(FailingJobYaml(missing));
  v1::SubmitJobResponse submitted;
  // The worker may still be registering: retry while the job is refused as too big.
  ASSERT_TRUE(WaitFor(
      [&] {
        grpc::ClientContext context;
        rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
        return jobs->SubmitJob(&context, submit, &submitted).ok();
      },
      std::chrono::seconds(60)))
      << cluster.Log("coordinator.1.log");
  const std::string id = submitted.job().job_id();
  v1::Job job;
  ASSERT_TRUE(WaitFor(
      [&] {
        grpc::ClientContext context;
        rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
        v1::GetJobRequest get;
        get.set_job_id(id);
        return jobs->GetJob(&context, get, &job).ok() && job.state() == v1::JOB_STATE_FAILED;
      },
      std::chrono::seconds(120)))
      << v1::JobState_Name(job.state()) << ": " << job.message() << "\n"
      << cluster.Log("coordinator.1.log") << cluster.Log("worker-node-a.log");

  v1::GetJobLogsRequest request;
  request.set_job_id(id);
  const LogsResult owner = ReadLogs(*jobs, kAliceToken, request);
  ASSERT_TRUE(owner.status.ok()) << rpc::Describe(owner.status);
  ASSERT_FALSE(owner.responses.empty());
  EXPECT_EQ(owner.responses[0].attempt(), 1);
  EXPECT_EQ(owner.responses[0].rank(), 0);
  EXPECT_EQ(owner.responses[0].worker_id(), "node-a");
  // The trainer's error, whose last line its RANK_EXITED event quotes, is in its stderr.
  std::string exit_message;
  {
    v1::WatchJobRequest watch;
    watch.set_job_id(id);
    watch.set_from_sequence(1);
    grpc::ClientContext context;
    rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
    auto reader = jobs->WatchJob(&context, watch);
    v1::WatchJobResponse item;
    while (reader->Read(&item)) {
      if (item.event().type() == v1::JOB_EVENT_TYPE_RANK_EXITED) exit_message = item.event().message();
    }
  }
  while (!exit_message.empty() && std::isspace(static_cast<unsigned char>(exit_message.back()))) {
    exit_message.pop_back();
  }
  ASSERT_FALSE(exit_message.empty());
  const std::string last_line = exit_message.substr(exit_message.rfind('\n') + 1);
  EXPECT_THAT(owner.data, HasSubstr(last_line));
  // ... and it failed for the reason the job was built for, not some other.
  EXPECT_THAT(owner.data, HasSubstr("no-such-train.tsv"));
  EXPECT_EQ(static_cast<int64_t>(owner.data.size()), owner.responses.back().size());

  // Followed, a finished rank's log ends after its last byte; the tail is its end.
  request.set_follow(true);
  request.set_tail_bytes(10);
  const LogsResult followed = ReadLogs(*jobs, kAliceToken, request);
  ASSERT_TRUE(followed.status.ok()) << rpc::Describe(followed.status);
  EXPECT_EQ(followed.data, owner.data.substr(owner.data.size() - 10));

  request = v1::GetJobLogsRequest();
  request.set_job_id(id);
  EXPECT_EQ(ReadLogs(*jobs, kAdminToken, request).data, owner.data);
  EXPECT_EQ(ReadLogs(*jobs, kBobToken, request).status.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  request.set_rank(1);
  EXPECT_EQ(ReadLogs(*jobs, kAliceToken, request).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace deepnet::testing
