// JobService over gRPC in-process, with a tokens file: who may list workers and who sees which
// job holds a slot, and the per-user limit on submissions and cancellations.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>

#include "coordinator/grpc/job_service_impl.h"
#include "tests/coordinator/coordinator_fixture.h"
#include "tests/coordinator/test_tokens.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

namespace v1 = deepnet::v1;
using testing::CoordinatorTest;
using testing::JobYaml;
using testing::TempDir;
using testing::Worker;

constexpr const char* kNode = "node-token-0123456789a";

class JobServiceTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    {
      std::ofstream tokens(dir_ / "tokens");
      tokens << kAlice << " alice\n"
             << kBob << " bob\n"
             << kRoot << " root admin\n"
             << kNode << " node worker\n";
    }
    absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Load(dir_ / "tokens");
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = std::move(*auth);
    service_ = std::make_unique<JobServiceImpl>(*coordinator_, *auth_, ServiceOptions());
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

  // What the service is built with; a derived fixture may ask for other limits.
  virtual JobServiceOptions ServiceOptions() const { return {}; }

  // A 30 s deadline and, unless `token` is empty, its bearer header.
  static void Prepare(grpc::ClientContext* context, const std::string& token) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!token.empty()) context->AddMetadata("authorization", std::string("Bearer ") + token);
  }

  grpc::Status SubmitJob(const v1::SubmitJobRequest& request, v1::SubmitJobResponse* response) {
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    return stub_->SubmitJob(&context, request, response);
  }

  grpc::Status ListWorkers(const std::string& token, v1::ListWorkersResponse* response) {
    grpc::ClientContext context;
    Prepare(&context, token);
    return stub_->ListWorkers(&context, v1::ListWorkersRequest(), response);
  }

  TempDir dir_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(JobServiceTest, ListWorkersShowsJobsOnlyToTheirOwnerAndAdmins) {
  Worker a = AddWorker("a", 2);
  AddWorker("b", 1);
  const std::string id = Submit(JobYaml(1, 2, ""));  // alice's
  coordinator_->Tick();
  ASSERT_EQ(a.sink->assignments.size(), 1u);

  for (const char* token : {kAlice, kRoot, kBob}) {
    SCOPED_TRACE(token);
    v1::ListWorkersResponse response;
    ASSERT_TRUE(ListWorkers(token, &response).ok());
    ASSERT_EQ(response.workers_size(), 2);
    const v1::Worker& w = response.workers(0);
    EXPECT_EQ(w.name(), "a");
    EXPECT_EQ(w.worker_id(), "a");
    EXPECT_EQ(w.state(), v1::WORKER_STATE_READY);
    EXPECT_EQ(w.slots_total(), 2);
    EXPECT_EQ(w.slots_used(), 2);  // every caller sees the counts
    EXPECT_EQ(w.slots_free(), 0);
    EXPECT_EQ(response.workers(1).slots_free(), 1);
    ASSERT_EQ(w.slots_size(), 2);
    for (const v1::SlotStatus& slot : w.slots()) {
      EXPECT_TRUE(slot.used());
      EXPECT_EQ(slot.kind(), v1::DEVICE_KIND_CPU);
      EXPECT_EQ(slot.device_index(), -1);
      if (std::string(token) == kBob) {
        EXPECT_FALSE(slot.has_task());  // used, but not whose
      } else {
        ASSERT_TRUE(slot.has_task());
        EXPECT_EQ(slot.task().job_id(), id);
        EXPECT_EQ(slot.task().attempt(), 1);
      }
    }
  }
}

TEST_F(JobServiceTest, ListWorkersNeedsAUserToken) {
  v1::ListWorkersResponse response;
  EXPECT_EQ(ListWorkers("", &response).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListWorkers("not-a-known-token-at-all", &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status worker = ListWorkers(kNode, &response);
  EXPECT_EQ(worker.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(worker.error_message(), ::testing::HasSubstr("worker token"));
}

// JobSpec's fields other than config_yaml are output only: what a client puts there is ignored,
// and every returned Job carries the values parsed from the YAML.
TEST_F(JobServiceTest, SubmitIgnoresOutputOnlySpecFieldsAndFillsThemFromTheYaml) {
  for (bool validate_only : {true, false}) {
    SCOPED_TRACE(validate_only ? "validate_only" : "submit");
    v1::SubmitJobRequest request;
    request.set_validate_only(validate_only);
    v1::JobSpec* spec = request.mutable_spec();
    spec->set_config_yaml(JobYaml(2, 1, "{priority: 3, labels: {team: nlp}}"));
    spec->set_name("not-the-yaml-name");
    spec->set_pipeline_stages(7);
    spec->set_data_parallel(5);
    spec->set_device(v1::DEVICE_KIND_CUDA);
    spec->set_priority(9);
    spec->set_max_steps(123456);
    spec->set_checkpoint_dir("/elsewhere");
    (*spec->mutable_labels())["team"] = "mt";
    v1::SubmitJobResponse response;
    grpc::Status status = SubmitJob(request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const v1::JobSpec& got = response.job().spec();
    EXPECT_EQ(got.name(), "test-job");
    EXPECT_EQ(got.pipeline_stages(), 2);
    EXPECT_EQ(got.data_parallel(), 1);
    EXPECT_EQ(got.device(), v1::DEVICE_KIND_CPU);
    EXPECT_EQ(got.priority(), 3);
    EXPECT_EQ(got.max_steps(), 10);
    EXPECT_EQ(got.checkpoint_dir(), "");
    EXPECT_EQ(got.labels().at("team"), "nlp");
  }
  auto listed = coordinator_->ListJobs(ListRequestData());
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->first.size(), 1u);  // validate_only stored nothing.
}

// Per-user limits on SubmitJob and CancelJob (issue 25, item 6): a user who submits and cancels
// as fast as the network allows is refused with RESOURCE_EXHAUSTED before a spec is parsed;
// other users and admins are not held up.
class WriteRateServiceTest : public JobServiceTest {
 protected:
  JobServiceOptions ServiceOptions() const override {
    JobServiceOptions options;
    options.writes.per_second = 0.001;  // Nothing refills within the test.
    options.writes.burst = 3;
    return options;
  }
  grpc::Status SubmitAs(const char* token, std::string* id = nullptr) {
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(JobYaml(1, 1, ""));
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    Prepare(&context, token);
    grpc::Status status = stub_->SubmitJob(&context, request, &response);
    if (id != nullptr) *id = response.job().job_id();
    return status;
  }
  grpc::Status CancelAs(const char* token, const std::string& id) {
    v1::CancelJobRequest request;
    request.set_job_id(id);
    v1::Job response;
    grpc::ClientContext context;
    Prepare(&context, token);
    return stub_->CancelJob(&context, request, &response);
  }
};

TEST_F(WriteRateServiceTest, SubmitsAndCancelsShareTheUsersBudget) {
  std::string id;
  ASSERT_TRUE(SubmitAs(kAlice, &id).ok());
  ASSERT_TRUE(SubmitAs(kAlice).ok());
  ASSERT_TRUE(CancelAs(kAlice, id).ok());
  const grpc::Status submit = SubmitAs(kAlice);
  EXPECT_EQ(submit.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(submit.error_message(), ::testing::HasSubstr("user alice: too many job submissions"));
  EXPECT_EQ(CancelAs(kAlice, id).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Bob and the admin are not held up by alice.
  EXPECT_TRUE(SubmitAs(kBob).ok());
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(SubmitAs(kRoot).ok()) << i;
  // The refused calls stored nothing: alice has the two jobs she was allowed.
  ListRequestData list;
  list.owner = "alice";
  EXPECT_EQ(coordinator_->ListJobs(list)->first.size(), 2u);
}

}  // namespace
}  // namespace deepnet::coordinator
