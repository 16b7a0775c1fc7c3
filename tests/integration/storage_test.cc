// Storage confinement and unprivileged trainers end to end (label `service`): a real
// deepnet-coordinator and deepnet-worker daemons with --storage-root, real trainers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/integration/service_cluster.h"

namespace deepnet::testing {
namespace {

using ::testing::HasSubstr;

std::string TinyJob(const std::string& checkpoint_dir, int64_t max_steps, int every_steps) {
  std::ostringstream y;
  y << "name: storage-test\n"
       "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn_dim: 32, "
       "max_positions: 64}\n"
       "data: {synthetic: {languages: [rev], pairs_per_language: 50, max_words: 4}, "
       "max_tokens: 96, max_len: 32, prefetch: 1}\n"
    << "train: {max_steps: " << max_steps << ", log_every: 1, probe_every: 0}\n"
    << "checkpoint: {dir: '" << checkpoint_dir << "', every_steps: " << every_steps << "}\n"
    << "runtime: {blas_threads: 1}\n"
       "parallel: {pipeline_stages: 1, data_parallel: 1}\n"
       "scheduling: {max_restarts: 0}\n";
  return y.str();
}

class StorageServiceTest : public ::testing::Test {
 protected:
  v1::Job Get(const std::string& id) { return GetJobAs(*jobs_, id); }
  std::string Submit(const std::string& yaml) {
    std::string id;
    const grpc::Status s = SubmitJobAs(*jobs_, yaml, &id);
    EXPECT_TRUE(s.ok()) << rpc::Describe(s);
    return id;
  }
  bool WaitState(const std::string& id, v1::JobState state) {
    return WaitFor([&] { return Get(id).state() == state; }, std::chrono::seconds(180));
  }

  ServiceCluster cluster_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
};

// The coordinator skips its check (--no-check-paths): the worker's own check refuses the
// assignment and the job fails at once with the reason, without restarts.
TEST_F(StorageServiceTest, WorkerRefusesAnAssignmentWhosePathsEscape) {
  ASSERT_TRUE(cluster_.StartCoordinator({"--no-check-paths"})) << cluster_.Log("coordinator.1.log");
  jobs_ = cluster_.Jobs();
  cluster_.StartWorker("w1", 1);
  const std::string id = Submit(TinyJob(cluster_.UserDir("bob") + "/ckpt", 10, 0));
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_FAILED))
      << Get(id).DebugString() << cluster_.Log("worker-w1.log");
  const v1::Job job = Get(id);
  EXPECT_THAT(job.message(), HasSubstr("checkpoint.dir: refused by the storage policy"));
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_FALSE(std::filesystem::exists(cluster_.UserDir("bob") + "/ckpt"));
}

// Without --no-check-paths the coordinator answers first, naming the field.
TEST_F(StorageServiceTest, CoordinatorRefusesEscapesAtSubmit) {
  ASSERT_TRUE(cluster_.StartCoordinator()) << cluster_.Log("coordinator.1.log");
  jobs_ = cluster_.Jobs();
  for (const std::string& dir :
       {cluster_.UserDir("bob") + "/ckpt", cluster_.dir() + "/ckpt", std::string("/root/ckpt")}) {
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(TinyJob(dir, 10, 0));
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
    const grpc::Status s = jobs_->SubmitJob(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << dir;
    EXPECT_THAT(s.error_message(), HasSubstr("checkpoint.dir: refused by the storage policy"));
  }
}

// A real trainer runs as the workers' trainer account (root only: otherwise as the test's
// user) and its checkpoints are that account's files.
TEST_F(StorageServiceTest, TrainersRunAsTheTrainerAccount) {
  ASSERT_TRUE(cluster_.StartCoordinator()) << cluster_.Log("coordinator.1.log");
  jobs_ = cluster_.Jobs();
  cluster_.StartWorker("w1", 1);
  const std::string ckpt = cluster_.UserDir("alice") + "/ckpt";
  const std::string id = Submit(TinyJob(ckpt, 100000, 2));
  ASSERT_TRUE(
      WaitFor([&] { return Get(id).latest_checkpoint_step() > 0; }, std::chrono::seconds(180)))
      << Get(id).DebugString() << cluster_.Log("worker-w1.log");
  const std::optional<std::pair<uid_t, gid_t>> account = TrainerAccount();
  const uid_t expected = account ? account->first : geteuid();
  const std::map<pid_t, int> trainers = cluster_.Trainers(id);
  ASSERT_EQ(trainers.size(), 1u);
  const std::string status = Slurp("/proc/" + std::to_string(trainers.begin()->first) + "/status");
  const std::string uid = std::to_string(expected);
  EXPECT_THAT(status, HasSubstr("Uid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid)) << status;
  struct stat st {};
  ASSERT_EQ(stat(ckpt.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, expected);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(id);
  v1::Job after;
  grpc::ClientContext context;
  rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
  EXPECT_TRUE(jobs_->CancelJob(&context, cancel, &after).ok());
  EXPECT_TRUE(WaitState(id, v1::JOB_STATE_CANCELLED));
}

// The owner's uid=/gid= in the tokens file reach the worker with the assignment and win over
// the worker's own trainer account (root only).
TEST_F(StorageServiceTest, TrainersRunAsTheOwnersUidFromTheTokensFile) {
  if (geteuid() != 0) GTEST_SKIP() << "only a root daemon switches accounts";
  std::ofstream(cluster_.dir() + "/tokens") << kAliceToken << " alice user uid=60005 gid=60006\n"
                                            << WorkerTokenLines();
  const std::string home = cluster_.storage_root() + "/users/alice";
  ASSERT_EQ(mkdir(home.c_str(), 0700), 0);
  ASSERT_EQ(chown(home.c_str(), 60005, 60006), 0);
  ASSERT_TRUE(cluster_.StartCoordinator()) << cluster_.Log("coordinator.1.log");
  jobs_ = cluster_.Jobs();
  cluster_.StartWorker("w1", 1);
  const std::string id = Submit(TinyJob(home + "/ckpt", 100000, 2));
  ASSERT_TRUE(
      WaitFor([&] { return Get(id).latest_checkpoint_step() > 0; }, std::chrono::seconds(180)))
      << Get(id).DebugString() << cluster_.Log("worker-w1.log");
  const std::map<pid_t, int> trainers = cluster_.Trainers(id);
  ASSERT_EQ(trainers.size(), 1u);
  const std::string status = Slurp("/proc/" + std::to_string(trainers.begin()->first) + "/status");
  EXPECT_THAT(status, HasSubstr("Uid:\t60005\t60005\t60005\t60005")) << status;
  EXPECT_THAT(status, HasSubstr("Gid:\t60006\t60006\t60006\t60006")) << status;
  struct stat st {};
  ASSERT_EQ(stat((home + "/ckpt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 60005u);
}

// A root worker daemon with no trainer account (and no uid= for the owner) starts nothing and
// says why.
TEST_F(StorageServiceTest, RootWorkerWithoutATrainerAccountRefusesToStartTrainers) {
  if (geteuid() != 0) GTEST_SKIP() << "only a root daemon needs a trainer account";
  ASSERT_TRUE(cluster_.StartCoordinator()) << cluster_.Log("coordinator.1.log");
  jobs_ = cluster_.Jobs();
  cluster_.give_trainer_account = false;
  cluster_.StartWorker("w1", 1);
  const std::string id = Submit(TinyJob(cluster_.UserDir("alice") + "/ckpt", 10, 0));
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_FAILED)) << Get(id).DebugString();
  EXPECT_THAT(Get(id).message(), HasSubstr("no account to run trainers as"));
  EXPECT_THAT(Get(id).message(), HasSubstr("--trainer-user"));
  EXPECT_TRUE(cluster_.Trainers(id).empty());
}

}  // namespace
}  // namespace deepnet::testing
