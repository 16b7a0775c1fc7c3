// SubmitJob through the real JobService with a storage root (--storage-root): the storage matrix
// as users see it, the owner's account sent with every assignment, and a worker's storage
// refusal failing the job at once.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_replace.h"
#include "coordinator/auth/auth.h"
#include "coordinator/grpc/job_service_impl.h"
#include "storage/storage_policy.h"
#include "tests/coordinator/coordinator_fixture.h"
#include "tests/coordinator/test_tokens.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

namespace v1 = deepnet::v1;
using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::TempDir;

class StorageSubmitTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    root_ = dir_ / "storage";
    for (const char* d :
         {"users/alice/runs", "users/bob/runs", "teams/nlp", "teams/vision", "datasets"}) {
      std::filesystem::create_directories(root_ + "/" + d);
    }
    std::ofstream(root_ + "/datasets/train.tsv") << "a\tb\n";
    std::ofstream(root_ + "/users/bob/secret.tsv") << "a\tb\n";
    ASSERT_EQ(mkfifo((root_ + "/users/alice/fifo").c_str(), 0600), 0);
    std::ofstream(dir_ / "tokens") << kAlice << " alice user teams=nlp uid=2001 gid=2002\n"
                                   << kBob << " bob\n";
    absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Load(dir_ / "tokens");
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = std::move(*auth);
    absl::StatusOr<storage::StoragePolicy> policy =
        storage::StoragePolicy::Create(root_, "--storage-root");
    ASSERT_TRUE(policy.ok()) << policy.status();
    options_.spec_check.check_paths = true;
    options_.spec_check.storage_policy = std::make_shared<const storage::StoragePolicy>(*policy);
    options_.accounts = auth_.get();
    Make();
    service_ = std::make_unique<JobServiceImpl>(*coordinator_, *auth_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::JobService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                        grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  // SubmitJob as `token` of a small job with the given extra YAML (data/checkpoint).
  grpc::Status Submit(const std::string& extra, const char* token = kAlice,
                      v1::SubmitJobResponse* out = nullptr) {
    return SubmitYaml(testing::JobYaml(1, 1, "") + extra, token, out);
  }
  grpc::Status SubmitYaml(const std::string& yaml, const char* token = kAlice,
                          v1::SubmitJobResponse* out = nullptr) {
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(yaml);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    context.AddMetadata("authorization", std::string("Bearer ") + token);
    v1::SubmitJobResponse response;
    return stub_->SubmitJob(&context, request, out != nullptr ? out : &response);
  }
  static std::string Checkpoint(const std::string& dir) {
    return "checkpoint: {dir: '" + dir + "'}\n";
  }
  static std::string Tsv(const std::string& path) {
    return "data: {source: tsv, train_path: '" + path + "'}\n";
  }
  // The message without the echoed path.
  static std::string Rule(const grpc::Status& status) {
    const std::string& m = status.error_message();
    return m.substr(0, m.rfind("(got"));
  }

  TempDir dir_;
  std::string root_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(StorageSubmitTest, OwnAndTeamFoldersAreAccepted) {
  EXPECT_TRUE(Submit(Checkpoint(root_ + "/users/alice/runs/a")).ok());
  EXPECT_TRUE(Submit(Checkpoint(root_ + "/users/alice/new/b")).ok());
  EXPECT_TRUE(Submit(Checkpoint(root_ + "/teams/nlp/runs/c")).ok());
  EXPECT_TRUE(Submit(Tsv(root_ + "/datasets/train.tsv")).ok());
  EXPECT_TRUE(Submit(Checkpoint(root_ + "/users/bob/runs/x"), kBob).ok());
}

TEST_F(StorageSubmitTest, EscapesAreInvalidArgumentNamingTheFieldAndTheRule) {
  for (const std::string& dir : std::vector<std::string>{
           root_ + "/users/bob/runs", root_ + "/users/bob/missing", root_ + "/users/alice/../bob",
           root_ + "//users//bob/", root_ + "/teams/vision/x", root_ + "/datasets", "/", "/etc",
           "/root", "/proc/self", dir_.path()}) {
    const grpc::Status status = Submit(Checkpoint(dir));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << dir;
    EXPECT_THAT(status.error_message(), HasSubstr("checkpoint.dir: refused by the storage policy"))
        << dir;
  }
  for (const std::string& path :
       std::vector<std::string>{root_ + "/users/bob/secret.tsv", "/etc/shadow", "/dev/zero",
                                root_ + "/users/alice/fifo", dir_ / "tokens"}) {
    const grpc::Status status = Submit(Tsv(path));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path;
    EXPECT_THAT(status.error_message(), HasSubstr("data.train_path: refused by the storage"))
        << path;
  }
}

// train.probe_file is read by the trainer like data.train_path and is held to the same rule
// (it escaped the policy before: it was not among the checked fields).
TEST_F(StorageSubmitTest, TheProbeFileIsCheckedLikeTheTrainingData) {
  const auto probe = [this](const std::string& path) {
    return SubmitYaml(absl::StrReplaceAll(
        testing::JobYaml(1, 1, ""),
        {{"train: {max_steps: 10}", "train: {max_steps: 10, probe_file: '" + path + "'}"}}));
  };
  EXPECT_TRUE(probe(root_ + "/datasets/train.tsv").ok());
  for (const std::string& path :
       std::vector<std::string>{root_ + "/users/bob/secret.tsv", "/etc/shadow", "/dev/zero",
                                root_ + "/users/alice/fifo", dir_ / "tokens"}) {
    const grpc::Status status = probe(path);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path;
    EXPECT_THAT(status.error_message(), HasSubstr("train.probe_file: refused by the storage"))
        << path;
    EXPECT_EQ(Rule(status).substr(Rule(status).find("refused")),
              Rule(Submit(Tsv(path))).substr(Rule(Submit(Tsv(path))).find("refused")))
        << path;
  }
}

TEST_F(StorageSubmitTest, SameAnswerWhetherOrNotThePathExists) {
  const grpc::Status existing = Submit(Tsv(root_ + "/users/bob/secret.tsv"));
  const grpc::Status missing = Submit(Tsv(root_ + "/users/bob/nothing.tsv"));
  EXPECT_EQ(Rule(existing), Rule(missing));
  EXPECT_EQ(Rule(existing), Rule(Submit(Tsv("/etc/shadow"))));
  EXPECT_EQ(Rule(existing), Rule(Submit(Tsv("/etc/none"))));
  EXPECT_EQ(Rule(Submit(Checkpoint(root_ + "/users/bob/runs"))),
            Rule(Submit(Checkpoint(root_ + "/users/bob/none"))));
}

TEST_F(StorageSubmitTest, AssignmentsCarryTheOwnersAccount) {
  const testing::Worker w = AddWorker("w1", 1);
  v1::SubmitJobResponse response;
  ASSERT_TRUE(Submit(Checkpoint(root_ + "/users/alice/runs/a"), kAlice, &response).ok());
  coordinator_->Tick();
  ASSERT_EQ(w.sink->assignments.size(), 1u);
  const AssignmentCommand& a = w.sink->assignments.back();
  EXPECT_EQ(a.owner, "alice");
  EXPECT_EQ(a.owner_teams, std::vector<std::string>{"nlp"});
  EXPECT_EQ(a.uid, 2001);
  EXPECT_EQ(a.gid, 2002);
}

TEST_F(StorageSubmitTest, AWorkersStorageRefusalFailsTheJobWithoutRestarts) {
  const testing::Worker w = AddWorker("w1", 1);
  v1::SubmitJobResponse response;
  ASSERT_TRUE(Submit(Checkpoint(root_ + "/users/alice/runs/a"), kAlice, &response).ok());
  const std::string id = response.job().job_id();
  coordinator_->Tick();
  ASSERT_EQ(w.sink->assignments.size(), 1u);
  ASSERT_TRUE(coordinator_
                  ->OnAssignmentRefused(w.id, w.epoch, id, 1,
                                        "checkpoint.dir: refused by the storage policy: ...")
                  .ok());
  for (int i = 0; i < 5; ++i) coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_THAT(coordinator_->GetJob(id)->record.state_reason, HasSubstr("storage policy"));
  EXPECT_EQ(w.sink->assignments.size(), 1u);  // No second attempt.
}

}  // namespace
}  // namespace deepnet::coordinator
