// The service end to end: a job submitted before its workers register waits in the queue with
// a pending reason (API, /metrics, `deepnetctl workers`) and runs once enough workers join.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <sstream>

#include "tests/integration/service_cluster.h"

namespace deepnet::testing {
namespace {

using ::testing::HasSubstr;

// A tiny 2x2 (pipeline x data) job on the synthetic task.
std::string TinyJob(const std::string& checkpoint_dir) {
  std::ostringstream y;
  y << "name: queued-test\n"
       "model: {encoder_layers: 2, decoder_layers: 2, d_model: 32, heads: 2, ffn_dim: 64, "
       "max_positions: 128, dropout: 0.0}\n"
       "data: {synthetic: {languages: [rev, cp], pairs_per_language: 200, max_words: 5}, "
       "max_tokens: 160, max_len: 64, prefetch: 2}\n"
       "optim: {lr: 2.0e-3, warmup_steps: 5}\n"
       "train: {max_steps: 10, log_every: 1, probe_every: 5, seed: 3}\n"
    << "checkpoint: {dir: " << checkpoint_dir << ", every_steps: 0, keep_last: 0}\n"
    << "runtime: {blas_threads: 1}\n"
       "parallel: {pipeline_stages: 2, data_parallel: 2, backend: gloo, timeout_s: 60}\n"
       "scheduling: {max_restarts: 2}\n";
  return y.str();
}

// `deepnetctl ARGS` against the cluster with `token`; its standard output.
std::string Deepnetctl(const ServiceCluster& cluster, const char* token, const std::string& args) {
  const std::string command = std::string("DEEPNET_TOKEN=") + token + " " + DEEPNETCTL_BINARY +
                              " --coordinator " + cluster.address() + " " + args;
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
  pclose(pipe);
  return out;
}

class QueuedJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.StartCoordinator()) << cluster_.Log("coordinator.1.log");
    jobs_ = cluster_.Jobs();
  }

  v1::Job Get(const std::string& id) { return GetJobAs(*jobs_, id); }

  v1::ListWorkersResponse Workers(const char* token) {
    v1::ListWorkersResponse response;
    const std::string json = Deepnetctl(cluster_, token, "workers -o json");
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &response).ok()) << json;
    return response;
  }

  ServiceCluster cluster_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
};

TEST_F(QueuedJobTest, JobSubmittedBeforeItsWorkersWaitsThenRunsWhenTheyRegister) {
  v1::SubmitJobRequest request;
  request.mutable_spec()->set_config_yaml(TinyJob(cluster_.UserDir("alice") + "/ckpt"));
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
    const grpc::Status s = jobs_->SubmitJob(&context, request, &submitted);
    ASSERT_TRUE(s.ok()) << rpc::Describe(s);  // no worker registered: accepted all the same
  }
  const std::string id = submitted.job().job_id();
  ASSERT_TRUE(WaitFor([&] { return Get(id).pending_code() == v1::PENDING_CODE_EXCEEDS_REGISTERED; },
                      std::chrono::seconds(30)));
  EXPECT_THAT(Get(id).pending_reason(), HasSubstr("no worker is registered"));
  EXPECT_THAT(HttpGet(cluster_.metrics_port(), "/metrics"),
              HasSubstr("deepnet_jobs_pending{reason=\"exceeds_registered\"} 1"));

  cluster_.StartWorker("w1", 2);
  ASSERT_TRUE(WaitFor(
      [&] {
        const v1::ListWorkersResponse w = Workers(kBobToken);
        return w.workers_size() == 1 && w.workers(0).state() == v1::WORKER_STATE_READY;
      },
      std::chrono::seconds(60)));
  const v1::ListWorkersResponse one = Workers(kBobToken);
  EXPECT_EQ(one.workers(0).name(), "w1");
  EXPECT_EQ(one.workers(0).slots_total(), 2);
  EXPECT_EQ(one.workers(0).slots_free(), 2);
  ASSERT_TRUE(WaitFor([&] { return Get(id).pending_reason().find("1 worker ready") !=
                                   std::string::npos; },
                      std::chrono::seconds(30)));
  EXPECT_EQ(Get(id).state(), v1::JOB_STATE_QUEUED);

  cluster_.StartWorker("w2", 2);
  ASSERT_TRUE(WaitFor([&] { return Get(id).state() == v1::JOB_STATE_SUCCEEDED; },
                      std::chrono::seconds(240)))
      << v1::JobState_Name(Get(id).state()) << ": " << Get(id).message() << "\n"
      << cluster_.Log("coordinator.1.log");
  EXPECT_EQ(Get(id).attempt(), 1);
  const v1::ListWorkersResponse two = Workers(kAdminToken);
  ASSERT_EQ(two.workers_size(), 2);
  for (const v1::Worker& w : two.workers()) {
    EXPECT_EQ(w.state(), v1::WORKER_STATE_READY);
    EXPECT_EQ(w.slots_free(), 2);  // the job ended: its slots are free again
  }
}

}  // namespace
}  // namespace deepnet::testing
