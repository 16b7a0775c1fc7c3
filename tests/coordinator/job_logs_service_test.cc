// JobService.GetJobLogs served in-process over gRPC with bearer tokens: who may read a job's
// trainer logs (its owner and admins), what the others get, and the bytes that come back.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "coordinator/auth/auth.h"
#include "coordinator/grpc/job_service_impl.h"
#include "coordinator/store/in_memory_job_store.h"
#include "rpc/rpc_util.h"
#include "tests/coordinator/log_serving_sink.h"
#include "tests/coordinator/test_tokens.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;

constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kWorker[] = "worker-token-0123456789";
constexpr char kYaml[] =
    "name: log-job\n"
    "model: {encoder_layers: 2, decoder_layers: 2, d_model: 16, heads: 2, ffn_dim: 32}\n"
    "train: {max_steps: 10}\n"
    "parallel: {pipeline_stages: 1, data_parallel: 1}\n";

struct Result {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;
  std::string data;
  std::vector<v1::GetJobLogsResponse> responses;
};

class JobLogsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "tokens") << kAlice << " alice\n"
                                   << kBob << " bob\n"
                                   << kAdmin << " root admin\n"
                                   << kWorker << " workers worker\n";
    auto auth = Authenticator::Load(dir_ / "tokens");
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = std::move(*auth);
    options_.rendezvous_address = "127.0.0.1:1";
    options_.spec_check.check_paths = false;
    epochs_ = *WorkerEpochStore::Open("");
    auto c = Coordinator::Create(options_, &store_, epochs_.get(), &rendezvous_, nullptr);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
    service_ = std::make_unique<JobServiceImpl>(*coordinator_, *auth_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::JobService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                                       grpc::InsecureChannelCredentials()));

    Registration reg;
    reg.worker_name = "node-a";
    reg.slots.push_back({0, false, -1});
    absl::StatusOr<RegistrationResult> r = coordinator_->Register(reg);
    ASSERT_TRUE(r.ok()) << r.status();
    sink_ = std::make_shared<testing::LogServingSink>(coordinator_.get(), "node-a");
    sink_->set_epoch(r->epoch);
    ASSERT_TRUE(coordinator_->AttachSession("node-a", r->epoch, r->session_secret, sink_).ok());
    absl::StatusOr<JobSpecInfo> spec = coordinator_->ParseSpec(kYaml);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<SubmitResultData> job = coordinator_->Submit({"alice", "", kYaml, *spec});
    ASSERT_TRUE(job.ok()) << job.status();
    job_id_ = job->job.record.id;
    coordinator_->Tick();  // placed on node-a as attempt 1
    sink_->SetLog({job_id_, 1, 0, LogStream::kStderr}, "E: loss is NaN\n", false);
    sink_->SetLog({job_id_, 1, 0, LogStream::kStdout}, "{\"event\":\"step\"}\n", false);
  }
  void TearDown() override {
    if (sink_) sink_->Stop();
    if (server_) server_->Shutdown();
  }

  Result Logs(const char* token, v1::GetJobLogsRequest request) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, token, std::chrono::seconds(30));
    auto reader = stub_->GetJobLogs(&context, request);
    Result result;
    v1::GetJobLogsResponse response;
    while (reader->Read(&response)) {
      result.data += response.data();
      result.responses.push_back(response);
    }
    const grpc::Status status = reader->Finish();
    result.code = status.error_code();
    result.message = status.error_message();
    return result;
  }
  Result Logs(const char* token) {
    v1::GetJobLogsRequest request;
    request.set_job_id(job_id_);
    return Logs(token, request);
  }

  testing::TempDir dir_;
  std::unique_ptr<Authenticator> auth_;
  CoordinatorOptions options_;
  InMemoryJobStore store_;
  std::unique_ptr<WorkerEpochStore> epochs_;
  RendezvousStore rendezvous_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<v1::JobService::Stub> stub_;
  std::shared_ptr<testing::LogServingSink> sink_;
  std::string job_id_;
};

TEST_F(JobLogsServiceTest, OwnerAndAdminReadTheLogOthersAreRefused) {
  const Result owner = Logs(kAlice);
  ASSERT_EQ(owner.code, grpc::StatusCode::OK) << owner.message;
  EXPECT_EQ(owner.data, "E: loss is NaN\n");
  ASSERT_FALSE(owner.responses.empty());
  EXPECT_EQ(owner.responses[0].attempt(), 1);
  EXPECT_EQ(owner.responses[0].rank(), 0);
  EXPECT_EQ(owner.responses[0].worker_id(), "node-a");
  EXPECT_EQ(owner.responses[0].stream(), v1::LOG_STREAM_STDERR);
  EXPECT_EQ(owner.responses[0].size(), 15);
  EXPECT_EQ(Logs(kAdmin).data, "E: loss is NaN\n");

  const Result other = Logs(kBob);
  EXPECT_EQ(other.code, grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(other.message, HasSubstr("bob"));
  EXPECT_TRUE(other.data.empty());
  EXPECT_EQ(Logs(kWorker).code, grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Logs("not-a-known-token-at-all").code, grpc::StatusCode::UNAUTHENTICATED);
  // The refused calls never reached the worker: it saw the owner's and the admin's reads.
  EXPECT_EQ(sink_->requests().size(), 2u);
}

TEST_F(JobLogsServiceTest, UnknownJobsAndBadFieldsAreRefusedNamingThem) {
  v1::GetJobLogsRequest request;
  request.set_job_id("j-999999");
  Result r = Logs(kBob, request);
  EXPECT_EQ(r.code, grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(r.message, HasSubstr("j-999999"));
  request.set_job_id(job_id_);
  request.set_offset(-5);
  r = Logs(kAlice, request);
  EXPECT_EQ(r.code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.message, HasSubstr("offset"));
  request.set_offset(0);
  request.set_rank(7);
  r = Logs(kAlice, request);
  EXPECT_EQ(r.code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.message, HasSubstr("rank"));
  request.clear_rank();
  request.set_offset(1 << 30);
  r = Logs(kAlice, request);
  EXPECT_EQ(r.code, grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(r.message, HasSubstr("node-a"));
  request.set_offset(0);
  request.set_stream(static_cast<v1::LogStream>(42));
  EXPECT_EQ(Logs(kAlice, request).code, grpc::StatusCode::INVALID_ARGUMENT);
  request.set_stream(v1::LOG_STREAM_STDOUT);
  request.set_follow(true);  // the trainer has exited: follow ends after the log
  r = Logs(kAlice, request);
  EXPECT_EQ(r.code, grpc::StatusCode::OK) << r.message;
  EXPECT_EQ(r.data, "{\"event\":\"step\"}\n");
}

TEST_F(JobLogsServiceTest, FollowSendsNewOutputAsItComesAndEndsWhenTheTrainerExits) {
  const testing::LogServingSink::LogKey key{job_id_, 1, 0, LogStream::kStdout};
  sink_->SetLog(key, "step 1\n", true);
  grpc::ClientContext context;
  rpc::PrepareContext(&context, kAlice, std::chrono::seconds(30));
  v1::GetJobLogsRequest request;
  request.set_job_id(job_id_);
  request.set_stream(v1::LOG_STREAM_STDOUT);
  request.set_follow(true);
  auto reader = stub_->GetJobLogs(&context, request);
  v1::GetJobLogsResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.data(), "step 1\n");
  sink_->AppendLog(key, "step 2\n", true);
  ASSERT_TRUE(reader->Read(&response));  // the next poll (a timer, no thread waits)
  EXPECT_EQ(response.data(), "step 2\n");
  sink_->AppendLog(key, "done\n", false);
  std::string rest;
  while (reader->Read(&response)) rest += response.data();
  EXPECT_EQ(rest, "done\n");
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(JobLogsServiceTest, CancellingAFollowEndsItAndFreesItsPlace) {
  const testing::LogServingSink::LogKey key{job_id_, 1, 0, LogStream::kStdout};
  sink_->SetLog(key, "step 1\n", true);
  grpc::ClientContext context;
  rpc::PrepareContext(&context, kAlice, std::chrono::seconds(30));
  v1::GetJobLogsRequest request;
  request.set_job_id(job_id_);
  request.set_stream(v1::LOG_STREAM_STDOUT);
  request.set_follow(true);
  auto reader = stub_->GetJobLogs(&context, request);
  v1::GetJobLogsResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(service_->open_streams(), 1);
  context.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  for (int i = 0; i < 2000 && service_->open_streams() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(service_->open_streams(), 0);
}

}  // namespace
}  // namespace deepnet::coordinator
