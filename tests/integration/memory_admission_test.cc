// Memory admission end to end: the real coordinator refuses a job beyond --cluster-slot-memory,
// and without that bound a job waits for a worker whose slots (--slot-memory-bytes) hold it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/integration/service_cluster.h"

namespace deepnet::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] =
    "name: memory-test\n"
    "model: {encoder_layers: 2, decoder_layers: 2, d_model: 32, heads: 2, ffn_dim: 64, "
    "max_positions: 128}\n"
    "data: {max_tokens: 160, max_len: 64}\n"
    "train: {max_steps: 1}\n"
    "parallel: {pipeline_stages: 1, data_parallel: 1}\n";

grpc::Status Submit(v1::JobService::Stub& jobs, v1::SubmitJobResponse* response) {
  v1::SubmitJobRequest request;
  request.mutable_spec()->set_config_yaml(kJob);
  grpc::ClientContext context;
  rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
  return jobs.SubmitJob(&context, request, response);
}

v1::Job Get(v1::JobService::Stub& jobs, const std::string& id) { return GetJobAs(jobs, id); }

TEST(MemoryAdmissionTest, ClusterSlotMemoryRefusesAtSubmission) {
  ServiceCluster cluster;
  ASSERT_TRUE(cluster.StartCoordinator({"--cluster-slot-memory", "1MiB"}))
      << cluster.Log("coordinator.1.log");
  v1::SubmitJobResponse response;
  const grpc::Status s = Submit(*cluster.Jobs(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(),
              HasSubstr("per rank, but the largest slot of this cluster has 1.00 MiB "
                        "(--cluster-slot-memory); the biggest part is "));
}

TEST(MemoryAdmissionTest, JobWaitsForASlotWithEnoughMemory) {
  ServiceCluster cluster;
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.Log("coordinator.1.log");
  std::unique_ptr<v1::JobService::Stub> jobs = cluster.Jobs();
  cluster.StartWorker("small", 2, {"--slot-memory-bytes", "1MiB"});
  v1::SubmitJobResponse response;
  const grpc::Status s = Submit(*jobs, &response);
  ASSERT_TRUE(s.ok()) << rpc::Describe(s);
  const std::string id = response.job().job_id();
  EXPECT_GT(response.job().memory_per_rank_bytes(), 1 << 20);
  EXPECT_FALSE(response.job().memory_biggest_part().empty());
  ASSERT_TRUE(
      WaitFor([&] { return Get(*jobs, id).pending_code() == v1::PENDING_CODE_EXCEEDS_SLOT_MEMORY; },
              std::chrono::seconds(60)))
      << Get(*jobs, id).pending_reason() << "\n"
      << cluster.Log("worker-small.log");
  EXPECT_THAT(Get(*jobs, id).pending_reason(),
              HasSubstr("but the largest slot of the ready workers has 1.00 MiB"));
}

}  // namespace
}  // namespace deepnet::testing
