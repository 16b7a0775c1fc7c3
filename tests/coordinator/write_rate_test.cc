// Per-user limits on SubmitJob and CancelJob (issue 25, item 6): a user who submits and cancels
// as fast as the network allows is refused with RESOURCE_EXHAUSTED before a spec is parsed,
// other users and admins are not held up.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>

#include "coordinator/grpc/job_service_impl.h"
#include "coordinator/grpc/write_rate_limiter.h"
#include "tests/coordinator/coordinator_fixture.h"
#include "tests/coordinator/test_tokens.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

namespace v1 = deepnet::v1;
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

class WriteRateServiceTest : public testing::CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    std::ofstream(dir_ / "tokens") << kAlice << " alice\n"
                                   << kBob << " bob\n"
                                   << kRoot << " root admin\n";
    absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Load(dir_ / "tokens");
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = std::move(*auth);
    JobServiceOptions options;
    options.writes.per_second = 0.001;  // Nothing refills within the test.
    options.writes.burst = 3;
    service_ = std::make_unique<JobServiceImpl>(*coordinator_, *auth_, options);
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
  grpc::Status SubmitAs(const char* token, std::string* id = nullptr) {
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(testing::JobYaml(1, 1, ""));
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    context.AddMetadata("authorization", std::string("Bearer ") + token);
    grpc::Status status = stub_->SubmitJob(&context, request, &response);
    if (id != nullptr) *id = response.job().job_id();
    return status;
  }
  grpc::Status CancelAs(const char* token, const std::string& id) {
    v1::CancelJobRequest request;
    request.set_job_id(id);
    v1::Job response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    context.AddMetadata("authorization", std::string("Bearer ") + token);
    return stub_->CancelJob(&context, request, &response);
  }

  testing::TempDir dir_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(WriteRateServiceTest, SubmitsAndCancelsShareTheUsersBudget) {
  std::string id;
  ASSERT_TRUE(SubmitAs(kAlice, &id).ok());
  ASSERT_TRUE(SubmitAs(kAlice).ok());
  ASSERT_TRUE(CancelAs(kAlice, id).ok());
  const grpc::Status submit = SubmitAs(kAlice);
  EXPECT_EQ(submit.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(submit.error_message(), HasSubstr("user alice: too many job submissions"));
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
