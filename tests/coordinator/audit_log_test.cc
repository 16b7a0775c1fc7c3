// The audit log: one JSON line per SubmitJob / CancelJob call, accepted or refused, with who
// called (also an admin cancelling another user's job), the outcome, the idempotency key and
// the spec's SHA-256; validate-only submits are not recorded; a log that cannot be written is
// counted and never fails the call.
#include "coordinator/auth/audit_log.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "coordinator/core/coordinator_metrics.h"
#include "coordinator/grpc/audit_interceptor.h"
#include "coordinator/grpc/job_service_impl.h"
#include "tests/coordinator/coordinator_fixture.h"
#include "tests/coordinator/test_tokens.h"
#include "tests/coordinator/test_util.h"
#include "tests/file_text.h"

namespace deepnet::coordinator {
namespace {

namespace v1 = deepnet::v1;
using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::TempDir;

TEST(AuditLogTest, Sha256MatchesTheStandardVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(AuditLogTest, RecordsAreOneJsonObjectPerLine) {
  AuditRecord r;
  r.time = absl::FromUnixMillis(1700000000123);
  r.user = "alice";
  r.role = "user";
  r.action = "submit";
  r.outcome = "INVALID_ARGUMENT";
  r.message = "job spec: model.d_model: must be > 0\nsecond line \"quoted\"";
  r.idempotency_key = "k1";
  r.spec_sha256 = Sha256Hex("x");
  const std::string line = AuditJson(r);
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["time"], "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(j["message"], "job spec: model.d_model: must be > 0 second line \"quoted\"");
  EXPECT_EQ(j["idempotency_key"], "k1");
  EXPECT_FALSE(j.contains("job_id"));
}

TEST(AuditLogTest, OpenFailsNamingThePathAndWriteFailuresAreCountedNotThrown) {
  absl::StatusOr<std::unique_ptr<AuditLog>> bad = AuditLog::Open("/nonexistent/dir/audit.log");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("/nonexistent/dir/audit.log"));
  if (!std::ifstream("/dev/full")) GTEST_SKIP() << "no /dev/full to make writes fail";
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> metrics = CoordinatorMetrics::Create("");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  CoordinatorMetrics* m = metrics->get();
  absl::StatusOr<std::unique_ptr<AuditLog>> full =
      AuditLog::Open("/dev/full", [m] { m->IncAuditWriteFailures(); });
  ASSERT_TRUE(full.ok()) << full.status();
  AuditRecord r;
  r.action = "cancel";
  EXPECT_FALSE((*full)->Write(r));
  EXPECT_FALSE((*full)->Write(r));
  EXPECT_THAT(m->Serialize(), HasSubstr("deepnet_audit_write_failures_total 2"));
}

class AuditServiceTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    {
      std::ofstream tokens(dir_ / "tokens");
      tokens << kAlice << " alice\n" << kBob << " bob\n" << kRoot << " root admin\n";
    }
    absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Load(dir_ / "tokens");
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = std::move(*auth);
    absl::StatusOr<std::unique_ptr<AuditLog>> log = AuditLog::Open(dir_ / "audit.log");
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = std::move(*log);
    service_ = std::make_unique<JobServiceImpl>(*coordinator_, *auth_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(MakeAuditInterceptorFactory(log_.get(), auth_.get()));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::JobService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                        grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  static void Prepare(grpc::ClientContext* context, const std::string& token) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!token.empty()) context->AddMetadata("authorization", std::string("Bearer ") + token);
  }

  grpc::Status Submit(const std::string& token, const std::string& yaml, const std::string& key,
                      bool validate_only, std::string* job_id = nullptr) {
    grpc::ClientContext context;
    Prepare(&context, token);
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(yaml);
    request.set_idempotency_key(key);
    request.set_validate_only(validate_only);
    v1::SubmitJobResponse response;
    grpc::Status status = stub_->SubmitJob(&context, request, &response);
    if (job_id != nullptr) *job_id = response.job().job_id();
    return status;
  }

  grpc::Status Cancel(const std::string& token, const std::string& job_id) {
    grpc::ClientContext context;
    Prepare(&context, token);
    v1::CancelJobRequest request;
    request.set_job_id(job_id);
    v1::Job response;
    return stub_->CancelJob(&context, request, &response);
  }

  std::vector<nlohmann::json> Records() {
    std::vector<nlohmann::json> records;
    std::istringstream in(deepnet::testing::ReadText(dir_ / "audit.log"));
    std::string line;
    while (std::getline(in, line)) records.push_back(nlohmann::json::parse(line));
    return records;
  }

  TempDir dir_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<AuditLog> log_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(AuditServiceTest, SubmitsAndCancelsAreRecordedWithWhoAndTheOutcome) {
  const std::string yaml = JobYaml(1, 1, "");
  std::string job_id;
  ASSERT_TRUE(Submit(kAlice, yaml, "", /*validate_only=*/true).ok());  // not recorded
  ASSERT_TRUE(Submit(kAlice, yaml, "key-1", false, &job_id).ok());
  ASSERT_TRUE(Submit(kAlice, yaml, "key-1", false).ok());  // a replay
  EXPECT_EQ(Submit(kAlice, "model: {d_model: -1}\n", "", false).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Submit("wrong-token-0123456789", yaml, "", false).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Cancel(kBob, job_id).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(Cancel(kRoot, job_id).ok());
  {  // Calls that change nothing pass the interceptor unrecorded, streams included.
    grpc::ClientContext get;
    Prepare(&get, kAlice);
    v1::GetJobRequest get_request;
    get_request.set_job_id(job_id);
    v1::Job job;
    ASSERT_TRUE(stub_->GetJob(&get, get_request, &job).ok());
    EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
    EXPECT_EQ(job.message(), "cancelled by root");  // the job's own history says who, too
    grpc::ClientContext watch;
    Prepare(&watch, kAlice);
    v1::WatchJobRequest watch_request;
    watch_request.set_job_id(job_id);
    watch_request.set_from_sequence(1);
    std::unique_ptr<grpc::ClientReader<v1::WatchJobResponse>> reader =
        stub_->WatchJob(&watch, watch_request);
    v1::WatchJobResponse event;
    int messages = 0;
    while (reader->Read(&event)) ++messages;
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_GE(messages, 2);  // the snapshot and the events
  }
  server_->Shutdown();  // every call's record is written before its status is sent

  const std::vector<nlohmann::json> records = Records();
  ASSERT_EQ(records.size(), 6u);
  for (const nlohmann::json& r : records) {
    EXPECT_THAT(r["time"].get<std::string>(),
                ::testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z"));
    EXPECT_THAT(r["peer"].get<std::string>(), HasSubstr("127.0.0.1"));
  }
  const nlohmann::json& submitted = records[0];
  EXPECT_EQ(submitted["user"], "alice");
  EXPECT_EQ(submitted["role"], "user");
  EXPECT_EQ(submitted["action"], "submit");
  EXPECT_EQ(submitted["job_id"], job_id);
  EXPECT_EQ(submitted["outcome"], "ok");
  EXPECT_EQ(submitted["idempotency_key"], "key-1");
  EXPECT_EQ(submitted["spec_sha256"], Sha256Hex(yaml));
  EXPECT_EQ(submitted["created"], true);
  EXPECT_FALSE(submitted.contains("message"));
  EXPECT_EQ(records[1]["job_id"], job_id);
  EXPECT_EQ(records[1]["created"], false);
  EXPECT_EQ(records[2]["outcome"], "INVALID_ARGUMENT");
  EXPECT_THAT(records[2]["message"].get<std::string>(), HasSubstr("model.d_model"));
  EXPECT_FALSE(records[2].contains("job_id"));
  EXPECT_EQ(records[3]["outcome"], "UNAUTHENTICATED");
  EXPECT_EQ(records[3]["user"], "");
  const nlohmann::json& refused = records[4];
  EXPECT_EQ(refused["user"], "bob");
  EXPECT_EQ(refused["action"], "cancel");
  EXPECT_EQ(refused["job_id"], job_id);
  EXPECT_EQ(refused["outcome"], "PERMISSION_DENIED");
  const nlohmann::json& cancelled = records[5];
  EXPECT_EQ(cancelled["user"], "root");
  EXPECT_EQ(cancelled["role"], "admin");
  EXPECT_EQ(cancelled["job_id"], job_id);
  EXPECT_EQ(cancelled["job_owner"], "alice");
  EXPECT_EQ(cancelled["outcome"], "ok");
  EXPECT_FALSE(cancelled.contains("spec_sha256"));
}

}  // namespace
}  // namespace deepnet::coordinator
