// JobService's streams on the callback API, in-process over loopback: 1,000 watchers cost far
// fewer threads than streams, the per-user cap, feeds waking their streams, shutdown, and raw
// requests with bad strings answered INVALID_ARGUMENT naming the field.
#include <dirent.h>
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coordinator/grpc/job_service_impl.h"
#include "rpc/reflection_gate.h"
#include "rpc/rpc_util.h"
#include "tests/coordinator/coordinator_fixture.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

namespace v1 = deepnet::v1;
using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::TempDir;
using testing::Worker;

constexpr const char* kAlice = "alice-token-0123456789";
constexpr const char* kBob = "bob-token-012345678901";
constexpr const char* kRoot = "root-token-0123456789a";

int ThreadCount() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

long RssKiB() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> value;
      return value;
    }
    status.ignore(1 << 16, '\n');
  }
  return -1;
}

void Prepare(grpc::ClientContext* context, const std::string& token) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  if (!token.empty()) context->AddMetadata("authorization", std::string("Bearer ") + token);
}

// Waits (up to a generous bound that only guards against a hang) until `done` holds.
template <class Predicate>
bool Eventually(Predicate done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class JobStreamsTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    std::ofstream tokens(dir_ / "tokens");
    tokens << kAlice << " alice\n" << kBob << " bob\n" << kRoot << " root admin\n";
  }

  void StartServer(StreamLimits limits) {
    absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Load(dir_ / "tokens");
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = std::move(*auth);
    JobServiceOptions options;
    options.streams = limits;
    service_ = std::make_unique<JobServiceImpl>(*coordinator_, *auth_, options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = NewChannel(0);
    stub_ = v1::JobService::NewStub(channel_);
  }

  // Channels with different arguments get connections of their own.
  std::shared_ptr<grpc::Channel> NewChannel(int n) {
    grpc::ChannelArguments args;
    args.SetInt("deepnet.test.channel", n);
    return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_),
                                     grpc::InsecureChannelCredentials(), args);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  // Raw bytes to a unary method: what a client not generated from our proto may send.
  grpc::Status RawCall(const std::string& method, const std::string& bytes,
                       const std::string& token = kAlice) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    Prepare(&context, token);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, "/deepnet.v1.JobService/" + method, grpc::StubOptions(), &request,
                   &response, [&done](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  }

  // A job of alice's that stays queued (no workers).
  std::string QueuedJob() { return Submit(JobYaml(1, 1, "")); }

  TempDir dir_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

// Counts what many client-side watchers saw.
struct Tally {
  std::mutex mu;
  std::condition_variable cv;
  int snapshots = 0;
  int done = 0;
  int ok = 0;
  int events = 0;
};

class Watcher : public grpc::ClientReadReactor<v1::WatchJobResponse> {
 public:
  Watcher(v1::JobService::Stub* stub, const std::string& job_id, Tally* tally) : tally_(tally) {
    Prepare(&context_, kAlice);
    request_.set_job_id(job_id);
    stub->async()->WatchJob(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    {
      std::lock_guard<std::mutex> lock(tally_->mu);
      if (response_.has_snapshot()) ++tally_->snapshots;
      if (response_.has_event()) ++tally_->events;
    }
    tally_->cv.notify_all();
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    {
      std::lock_guard<std::mutex> lock(tally_->mu);
      ++tally_->done;
      tally_->ok += status.ok();
    }
    tally_->cv.notify_all();
  }

 private:
  Tally* tally_;
  grpc::ClientContext context_;
  v1::WatchJobRequest request_;
  v1::WatchJobResponse response_;
};

TEST_F(JobStreamsTest, ThousandWatchersHoldFarFewerThreadsThanStreams) {
  StreamLimits limits;
  limits.per_user = 2000;
  StartServer(limits);
  const std::string id = QueuedJob();
  constexpr int kWatchers = 1000;
  constexpr int kChannels = 8;
  std::vector<std::unique_ptr<v1::JobService::Stub>> stubs;
  for (int c = 0; c < kChannels; ++c) stubs.push_back(v1::JobService::NewStub(NewChannel(c + 1)));
  // Warm every connection up before counting.
  for (auto& stub : stubs) {
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    v1::GetJobRequest request;
    request.set_job_id(id);
    v1::Job job;
    ASSERT_TRUE(stub->GetJob(&context, request, &job).ok());
  }
  const int threads_before = ThreadCount();
  const long rss_before = RssKiB();

  Tally tally;
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kWatchers; ++i) {
    watchers.push_back(std::make_unique<Watcher>(stubs[i % kChannels].get(), id, &tally));
  }
  {
    std::unique_lock<std::mutex> lock(tally.mu);
    ASSERT_TRUE(tally.cv.wait_for(lock, std::chrono::seconds(120),
                                  [&] { return tally.snapshots == kWatchers; }))
        << tally.snapshots << " snapshots";
  }
  EXPECT_EQ(service_->open_streams(), kWatchers);
  const int threads_open = ThreadCount();
  const long rss_open = RssKiB();
  std::cout << "threads: " << threads_before << " before, " << threads_open << " with " << kWatchers
            << " open watchers (server and client in this process); RSS " << rss_before
            << " KiB before, " << rss_open << " KiB with them open ("
            << (rss_open - rss_before) * 1024 / kWatchers << " bytes per watcher, both ends)\n";
  EXPECT_LT(threads_open, 200);

  // One event reaches every watcher at once, and the job's end ends every stream OK.
  ASSERT_TRUE(coordinator_->Cancel(id, "the test is done").ok());
  {
    std::unique_lock<std::mutex> lock(tally.mu);
    ASSERT_TRUE(
        tally.cv.wait_for(lock, std::chrono::seconds(120), [&] { return tally.done == kWatchers; }))
        << tally.done << " done";
    EXPECT_EQ(tally.ok, kWatchers);
    EXPECT_GE(tally.events, kWatchers);  // at least the state change to CANCELLED
  }
  EXPECT_TRUE(Eventually([&] { return service_->open_streams() == 0; }));
}

// A stream outlives no token (issue 25, item 8): when the tokens file is reloaded without
// alice's token (SIGHUP), her open watch ends UNAUTHENTICATED and new calls are refused, while
// root's stream goes on; a token that expires ends its stream the same way.
TEST_F(JobStreamsTest, StreamsEndWhenTheirTokenIsRevokedOrExpires) {
  StreamLimits limits;
  limits.sweep_interval = absl::Milliseconds(200);
  {
    std::ofstream tokens(dir_ / "tokens", std::ios::trunc);
    tokens << kAlice << " alice\n" << kBob << " bob\n" << kRoot << " root admin\n";
  }
  StartServer(limits);
  const std::string id = QueuedJob();
  v1::WatchJobRequest request;
  request.set_job_id(id);
  v1::WatchJobResponse response;
  grpc::ClientContext alice_context, root_context;
  Prepare(&alice_context, kAlice);
  Prepare(&root_context, kRoot);
  auto alice = stub_->WatchJob(&alice_context, request);
  auto root = stub_->WatchJob(&root_context, request);
  ASSERT_TRUE(alice->Read(&response));
  ASSERT_TRUE(root->Read(&response));

  std::ofstream(dir_ / "tokens", std::ios::trunc) << kBob << " bob\n" << kRoot << " root admin\n";
  ASSERT_TRUE(auth_->Reload(dir_ / "tokens").ok());
  while (alice->Read(&response)) {
  }
  const grpc::Status ended = alice->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(ended.error_message(), HasSubstr("revoked"));
  EXPECT_EQ(RawCall("ListJobs", "", kAlice).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // alice's place is given back once gRPC is done with her stream; root's goes on.
  EXPECT_TRUE(Eventually([&] { return service_->open_streams() == 1; }));
  root_context.TryCancel();
  root->Finish();

  // An expiring token: carol's (added back with a reload) ends by itself.
  {
    std::ofstream tokens(dir_ / "tokens", std::ios::trunc);
    tokens << kRoot << " root admin\ncarol-token-0123456789 carol expires="
           << absl::FormatTime(absl::RFC3339_sec, absl::Now() + absl::Seconds(4),
                               absl::UTCTimeZone())
           << "\n";
  }
  ASSERT_TRUE(auth_->Reload(dir_ / "tokens").ok());
  const std::string carol_token = "carol-token-0123456789";
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_config_yaml(JobYaml(1, 1, ""));
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext context;
    Prepare(&context, carol_token);
    ASSERT_TRUE(stub_->SubmitJob(&context, submit, &submitted).ok());
  }
  grpc::ClientContext carol_context;
  Prepare(&carol_context, carol_token);
  v1::StreamMetricsRequest metrics;
  metrics.set_job_id(submitted.job().job_id());
  auto stream = stub_->StreamMetrics(&carol_context, metrics);
  v1::StreamMetricsResponse points;
  while (stream->Read(&points)) {
  }
  const grpc::Status expired = stream->Finish();
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::UNAUTHENTICATED) << expired.error_message();
  EXPECT_THAT(expired.error_message(), HasSubstr("expired"));
}

TEST_F(JobStreamsTest, PerUserCapRefusesNamingTheLimitAndIsFreedOnCancel) {
  StreamLimits limits;
  limits.per_user = 3;
  limits.per_admin = 5;
  StartServer(limits);
  const std::string id = QueuedJob();
  v1::WatchJobRequest request;
  request.set_job_id(id);
  v1::WatchJobResponse response;

  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::WatchJobResponse>>> readers;
  for (int i = 0; i < 3; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    Prepare(contexts.back().get(), kAlice);
    readers.push_back(stub_->WatchJob(contexts.back().get(), request));
    ASSERT_TRUE(readers.back()->Read(&response));
    EXPECT_TRUE(response.has_snapshot());
  }
  {
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    auto over = stub_->WatchJob(&context, request);
    EXPECT_FALSE(over->Read(&response));
    const grpc::Status status = over->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(status.error_message(), HasSubstr("alice"));
    EXPECT_THAT(status.error_message(), HasSubstr("3 open streams"));
    EXPECT_THAT(status.error_message(), HasSubstr("--max-streams-per-user"));
  }
  {
    // The other kinds of stream count too.
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    v1::StreamMetricsRequest metrics;
    metrics.set_job_id(id);
    auto over = stub_->StreamMetrics(&context, metrics);
    v1::StreamMetricsResponse points;
    EXPECT_FALSE(over->Read(&points));
    EXPECT_EQ(over->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  {
    // Another user (here an admin, with a limit of its own) is not affected.
    grpc::ClientContext context;
    Prepare(&context, kRoot);
    auto other = stub_->WatchJob(&context, request);
    ASSERT_TRUE(other->Read(&response));
    context.TryCancel();
    EXPECT_EQ(other->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // Cancelling one of alice's streams gives its place back.
  contexts[0]->TryCancel();
  EXPECT_EQ(readers[0]->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(Eventually([&] { return service_->open_streams() == 2; }));
  {
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    auto again = stub_->WatchJob(&context, request);
    ASSERT_TRUE(again->Read(&response));
    context.TryCancel();
    again->Finish();
  }
  for (size_t i = 1; i < contexts.size(); ++i) {
    contexts[i]->TryCancel();
    readers[i]->Finish();
  }
  EXPECT_TRUE(Eventually([&] { return service_->open_streams() == 0; }));
}

TEST_F(JobStreamsTest, NewPointsAndTheJobsEndWakeAMetricsStream) {
  StartServer(StreamLimits());
  Worker a = AddWorker("a", 1);
  const std::string id = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  Running(a);
  ASSERT_EQ(State(id), JobState::kRunning);

  grpc::ClientContext context;
  Prepare(&context, kAlice);
  v1::StreamMetricsRequest request;
  request.set_job_id(id);
  request.set_live_only(true);
  auto reader = stub_->StreamMetrics(&context, request);
  ASSERT_TRUE(Eventually([&] { return service_->open_streams() == 1; }));
  MetricReport report{id, 1, 0, {}, {}};
  report.points.push_back({7, 2.5, 2.4, 1e-3, 0.7, 1000, 0.01, 0, 0, 0});
  ASSERT_TRUE(coordinator_->OnMetrics("a", a.epoch, report).ok());
  v1::StreamMetricsResponse response;
  ASSERT_TRUE(reader->Read(&response));
  ASSERT_EQ(response.points_size(), 1);
  EXPECT_EQ(response.points(0).step(), 7);

  Exit(a, 0);
  coordinator_->Tick();
  EXPECT_FALSE(reader->Read(&response));
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(JobStreamsTest, StreamsEndUnavailableWhenTheCoordinatorShutsDown) {
  StartServer(StreamLimits());
  const std::string id = QueuedJob();
  grpc::ClientContext watch_context;
  Prepare(&watch_context, kAlice);
  v1::WatchJobRequest watch;
  watch.set_job_id(id);
  auto watcher = stub_->WatchJob(&watch_context, watch);
  v1::WatchJobResponse snapshot;
  ASSERT_TRUE(watcher->Read(&snapshot));
  grpc::ClientContext metrics_context;
  Prepare(&metrics_context, kAlice);
  v1::StreamMetricsRequest metrics;
  metrics.set_job_id(id);
  auto points = stub_->StreamMetrics(&metrics_context, metrics);
  ASSERT_TRUE(Eventually([&] { return service_->open_streams() == 2; }));

  coordinator_->Shutdown();
  v1::WatchJobResponse more;
  EXPECT_FALSE(watcher->Read(&more));
  EXPECT_EQ(watcher->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::StreamMetricsResponse none;
  EXPECT_FALSE(points->Read(&none));
  EXPECT_EQ(points->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(Eventually([&] { return service_->open_streams() == 0; }));
  server_->Shutdown();  // nothing left open: returns at once
  server_.reset();
}

TEST_F(JobStreamsTest, ServerShutdownEndsOpenStreamsWithoutHanging) {
  StartServer(StreamLimits());
  const std::string id = QueuedJob();
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::WatchJobResponse>>> readers;
  v1::WatchJobRequest request;
  request.set_job_id(id);
  for (int i = 0; i < 20; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    Prepare(contexts.back().get(), kAlice);
    readers.push_back(stub_->WatchJob(contexts.back().get(), request));
    v1::WatchJobResponse snapshot;
    ASSERT_TRUE(readers.back()->Read(&snapshot));
  }
  // The coordinator keeps running: the server's deadline cancels the streams.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  for (auto& reader : readers) {
    v1::WatchJobResponse more;
    EXPECT_FALSE(reader->Read(&more));
    EXPECT_FALSE(reader->Finish().ok());
  }
  EXPECT_TRUE(Eventually([&] { return service_->open_streams() == 0; }));
  server_.reset();
}

TEST_F(JobStreamsTest, NulBytesAndOversizeIdentifiersAreInvalidArgumentNamingTheField) {
  StartServer(StreamLimits());
  const std::string id = QueuedJob();
  {
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    v1::GetJobRequest request;
    request.set_job_id(id + std::string("\0x", 2));
    v1::Job job;
    const grpc::Status status = stub_->GetJob(&context, request, &job);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("job_id: contains a NUL byte"));
  }
  {
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    v1::WatchJobRequest request;
    request.set_job_id(std::string("j-\0", 3));
    auto reader = stub_->WatchJob(&context, request);
    v1::WatchJobResponse response;
    EXPECT_FALSE(reader->Read(&response));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("job_id: contains a NUL byte"));
  }
  {
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    v1::ListJobsRequest request;
    (*request.mutable_labels())["team"] = std::string("a\0b", 3);
    v1::ListJobsResponse response;
    const grpc::Status status = stub_->ListJobs(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("labels[\"team\"]: contains a NUL byte"));
  }
  {
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(JobYaml(1, 1, ""));
    request.set_idempotency_key(std::string("key\0", 4));
    v1::SubmitJobResponse response;
    const grpc::Status status = stub_->SubmitJob(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("idempotency_key: contains a NUL byte"));
  }
  {
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    v1::GetJobRequest request;
    request.set_job_id(std::string(100000, 'j'));
    v1::Job job;
    const grpc::Status status = stub_->GetJob(&context, request, &job);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("job_id: 100000 bytes, more than the 4096"));
    EXPECT_LT(status.error_message().size(), 200u);
  }
  {
    // Past the server's 4 MiB receive limit gRPC refuses the message before any handler.
    grpc::ClientContext context;
    Prepare(&context, kAlice);
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(std::string(5 << 20, '#'));
    v1::SubmitJobResponse response;
    const grpc::Status status = stub_->SubmitJob(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(status.error_message(), HasSubstr("vs. 4194304")) << status.error_message();
  }
}

// The bytes of `message` with `placeholder` (which must occur once) overwritten by `bytes` of
// the same length: a string field holding what a generated client would never send.
std::string WithBytes(const google::protobuf::Message& message, const std::string& placeholder,
                      const std::string& bytes) {
  std::string wire = message.SerializeAsString();
  const size_t at = wire.find(placeholder);
  EXPECT_NE(at, std::string::npos);
  EXPECT_EQ(placeholder.size(), bytes.size());
  if (at != std::string::npos) wire.replace(at, placeholder.size(), bytes);
  return wire;
}

TEST_F(JobStreamsTest, InvalidUtf8IsInvalidArgumentNamingTheField) {
  StartServer(StreamLimits());
  const std::string id = QueuedJob();
  {
    v1::GetJobRequest request;
    request.set_job_id("j-XXXX");
    const grpc::Status status = RawCall("GetJob", WithBytes(request, "XXXX", "\xff\xfe\xc3\x28"));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "job_id: invalid UTF-8 at byte 2");
  }
  {
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(JobYaml(1, 1, "") + "# XXXX\n");
    const grpc::Status status =
        RawCall("SubmitJob", WithBytes(request, "XXXX", "\xed\xa0\x80!"));  // a surrogate
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("spec.config_yaml: invalid UTF-8 at byte"));
  }
  {
    v1::ListJobsRequest request;
    (*request.mutable_labels())["team"] = "XXXX";
    const grpc::Status status = RawCall("ListJobs", WithBytes(request, "XXXX", "ok\xc0\xaf"));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "labels[\"team\"]: invalid UTF-8 at byte 2");
  }
  {
    v1::ListJobsRequest request;
    (*request.mutable_labels())["XXXX"] = "value";
    const grpc::Status status = RawCall("ListJobs", WithBytes(request, "XXXX", "\x80xyz"));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "labels (a key): invalid UTF-8 at byte 0");
  }
  {
    v1::CancelJobRequest request;
    request.set_job_id(id);
    request.set_reason("XXXX");
    const grpc::Status status =
        RawCall("CancelJob", WithBytes(request, "XXXX", "\xf5\x80\x80\x80"));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "reason: invalid UTF-8 at byte 0");
    EXPECT_EQ(State(id), JobState::kQueued);  // nothing happened
  }
  {
    // Bytes that are no message at all.
    const grpc::Status status = RawCall("GetJob", std::string("\x0a\xff\xff\xff", 4));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("deepnet.v1.GetJobRequest"));
  }
  {
    // The token is checked first: a stranger learns nothing about the request.
    v1::GetJobRequest request;
    request.set_job_id("j-XXXX");
    const grpc::Status status =
        RawCall("GetJob", WithBytes(request, "XXXX", "\xff\xfe\xc3\x28"), "no-such-token-0123456");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    // Well-formed raw bytes are served as usual.
    v1::GetJobRequest request;
    request.set_job_id(id);
    EXPECT_TRUE(RawCall("GetJob", request.SerializeAsString()).ok());
  }
}

// A streaming call with raw bytes: one request, then every response's bytes.
class RawStreamCall : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RawStreamCall(grpc::GenericStub& stub, const std::string& token, const std::string& method,
                const std::string& bytes) {
    Prepare(&context_, token);
    grpc::Slice slice(bytes);
    request_ = grpc::ByteBuffer(&slice, 1);
    stub.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&response_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    std::vector<grpc::Slice> slices;
    (void)response_.Dump(&slices);
    for (const grpc::Slice& slice : slices) {
      text_.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override { done_.set_value(status); }
  grpc::Status Wait() { return done_.get_future().get(); }
  const std::string& text() const { return text_; }

 private:
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  std::string text_;
  std::promise<grpc::Status> done_;
};

// A reflection client's list_services request: ServerReflectionRequest field 7, written by hand
// (the reflection protos are not installed).
class ReflectionCall : public RawStreamCall {
 public:
  ReflectionCall(grpc::GenericStub& stub, const std::string& token, const std::string& method)
      : RawStreamCall(stub, token, method, std::string("\x3a\x00", 2)) {}
};

TEST_F(JobStreamsTest, InvalidUtf8InAStreamRequestIsInvalidArgumentNamingTheField) {
  StartServer(StreamLimits());
  QueuedJob();
  grpc::GenericStub stub(channel_);
  v1::WatchJobRequest watch;
  watch.set_job_id("j-XXXX");
  RawStreamCall call(stub, kAlice, "/deepnet.v1.JobService/WatchJob",
                     WithBytes(watch, "XXXX",
                               "\xc3\x28"
                               "ab"));
  const grpc::Status status = call.Wait();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "job_id: invalid UTF-8 at byte 2");
  EXPECT_TRUE(call.text().empty());
  EXPECT_EQ(service_->open_streams(), 0);
}

TEST_F(JobStreamsTest, ReflectionNeedsAToken) {
  rpc::EnableHealthAndReflection();
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Load(dir_ / "tokens");
  ASSERT_TRUE(auth.ok()) << auth.status();
  std::vector<std::unique_ptr<grpc::Service>> listed;
  listed.push_back(std::make_unique<v1::JobService::Service>());
  const Authenticator& authenticator = **auth;
  absl::StatusOr<std::unique_ptr<rpc::ReflectionGate>> gate = rpc::ReflectionGate::Create(
      std::move(listed), [&authenticator](const grpc::ServerContextBase& context) {
        return rpc::ToGrpc(authenticator.Authenticate(context).status());
      });
  ASSERT_TRUE(gate.ok()) << gate.status();
  JobServiceImpl service(*coordinator_, authenticator);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  (*gate)->AttachTo(builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  grpc::GenericStub stub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  const std::string method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  {
    ReflectionCall call(stub, "", method);
    const grpc::Status status = call.Wait();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
    EXPECT_TRUE(call.text().empty());
  }
  {
    ReflectionCall call(stub, "not-a-known-token-at-all", method);
    EXPECT_EQ(call.Wait().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  for (const char* token : {kBob, kRoot}) {
    ReflectionCall call(stub, token, method);
    const grpc::Status status = call.Wait();
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_THAT(call.text(), HasSubstr("deepnet.v1.JobService"));
  }
  {
    ReflectionCall call(stub, kBob, "/no.such.Service/Method");
    EXPECT_EQ(call.Wait().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace
}  // namespace deepnet::coordinator
