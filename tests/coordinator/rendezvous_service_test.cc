#include "coordinator/rendezvous/rendezvous_service.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

namespace v1 = deepnet::v1;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr auto kServiceLiveness = std::chrono::seconds(30);

void SetTimeout(milliseconds ms, google::protobuf::Duration* out) {
  out->set_seconds(ms.count() / 1000);
  out->set_nanos(static_cast<int32_t>(ms.count() % 1000 * 1000000));
}

// Serves the Rendezvous service on 127.0.0.1 at a port the OS picks.
class RendezvousServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store_.OpenAttempt({"job", 1}).ok());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    stub_ = v1::Rendezvous::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                                        grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { StopServer(); }

  void StopServer() {
    if (!server_) return;
    store_.Shutdown();  // First: calls still waiting end, so the server's shutdown returns.
    server_->Shutdown();
    server_.reset();
  }

  template <typename Request>
  static void Scope(Request& request, int attempt = 1) {
    request.mutable_scope()->set_job_id("job");
    request.mutable_scope()->set_attempt(attempt);
  }

  grpc::Status Set(const std::string& key, const std::string& value) {
    v1::RendezvousSetRequest request;
    Scope(request);
    request.set_key(key);
    request.set_value(value);
    v1::RendezvousSetResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kServiceLiveness);
    return stub_->Set(&context, request, &response);
  }

  // Get waiting up to `timeout`, with a client deadline of `deadline` from now.
  grpc::Status Get(const std::string& key, milliseconds timeout, milliseconds deadline,
                   std::string* value, grpc::ClientContext* context = nullptr) {
    v1::RendezvousGetRequest request;
    Scope(request);
    request.set_key(key);
    SetTimeout(timeout, request.mutable_timeout());
    v1::RendezvousGetResponse response;
    grpc::ClientContext local;
    if (context == nullptr) context = &local;
    context->set_deadline(std::chrono::system_clock::now() + deadline);
    grpc::Status status = stub_->Get(context, request, &response);
    if (value != nullptr) *value = response.value();
    return status;
  }

  RendezvousStore store_;
  RendezvousService service_{store_};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
};

TEST_F(RendezvousServiceTest, BlockedGetIsReleasedByASetFromAnotherClient) {
  std::string value;
  auto getter = std::async(std::launch::async, [&] {
    return Get("addr", milliseconds(60000), milliseconds(90000), &value);
  });
  while (store_.num_waiters() == 0) std::this_thread::yield();
  ASSERT_TRUE(Set("addr", "10.1.2.3:4567").ok());
  ASSERT_EQ(getter.wait_for(kServiceLiveness), std::future_status::ready);
  grpc::Status status = getter.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(value, "10.1.2.3:4567");
}

TEST_F(RendezvousServiceTest, GetTimeoutNamesTheMissingKey) {
  grpc::Status status = Get("absent", milliseconds(50), milliseconds(30000), nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(status.error_message(), HasSubstr("'absent'"));
  EXPECT_EQ(store_.num_waiters(), 0u);
}

TEST_F(RendezvousServiceTest, GetWithoutTimeoutIsNotFoundAtOnce) {
  grpc::Status status = Get("absent", milliseconds(0), milliseconds(30000), nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Set("present", "v").ok());
  std::string value;
  EXPECT_TRUE(Get("present", milliseconds(0), milliseconds(30000), &value).ok());
  EXPECT_EQ(value, "v");
}

TEST_F(RendezvousServiceTest, ClientDeadlineShorterThanTimeoutEndsTheWait) {
  grpc::Status status = Get("absent", milliseconds(3600000), milliseconds(100), nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server's wait ends at the client's deadline too (not an hour later).
  const auto start = std::chrono::steady_clock::now();
  while (store_.num_waiters() != 0 && std::chrono::steady_clock::now() - start < kServiceLiveness) {
    std::this_thread::yield();
  }
  EXPECT_EQ(store_.num_waiters(), 0u);
}

TEST_F(RendezvousServiceTest, ClientCancellationFreesTheWait) {
  grpc::ClientContext context;
  auto getter = std::async(std::launch::async, [&] {
    return Get("absent", milliseconds(3600000), milliseconds(3600000), nullptr, &context);
  });
  while (store_.num_waiters() == 0) std::this_thread::yield();
  context.TryCancel();
  ASSERT_EQ(getter.wait_for(kServiceLiveness), std::future_status::ready);
  EXPECT_EQ(getter.get().error_code(), grpc::StatusCode::CANCELLED);
  const auto start = std::chrono::steady_clock::now();
  while (store_.num_waiters() != 0 && std::chrono::steady_clock::now() - start < kServiceLiveness) {
    std::this_thread::yield();
  }
  EXPECT_EQ(store_.num_waiters(), 0u);
}

TEST_F(RendezvousServiceTest, ShutdownEndsBlockedCallsUnavailable) {
  auto getter = std::async(std::launch::async, [&] {
    return Get("absent", milliseconds(3600000), milliseconds(3600000), nullptr);
  });
  while (store_.num_waiters() == 0) std::this_thread::yield();
  auto stopper = std::async(std::launch::async, [&] { StopServer(); });
  ASSERT_EQ(stopper.wait_for(kServiceLiveness), std::future_status::ready);
  ASSERT_EQ(getter.wait_for(kServiceLiveness), std::future_status::ready);
  EXPECT_EQ(getter.get().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(RendezvousServiceTest, AddWaitCheckDeleteCompareSetAndNumKeys) {
  v1::RendezvousAddRequest add;
  Scope(add);
  add.set_key("count");
  add.set_delta(2);
  v1::RendezvousAddResponse added;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Add(&context, add, &added).ok());
  }
  EXPECT_EQ(added.value(), 2);

  v1::RendezvousWaitRequest wait;
  Scope(wait);
  wait.add_keys("count");
  SetTimeout(milliseconds(1000), wait.mutable_timeout());
  v1::RendezvousWaitResponse waited;
  {
    grpc::ClientContext context;
    EXPECT_TRUE(stub_->Wait(&context, wait, &waited).ok());
  }

  v1::RendezvousCompareSetRequest cas;
  Scope(cas);
  cas.set_key("leader");
  cas.set_desired_value("rank0");
  v1::RendezvousCompareSetResponse swapped;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->CompareSet(&context, cas, &swapped).ok());
  }
  EXPECT_TRUE(swapped.swapped());
  EXPECT_EQ(swapped.value(), "rank0");
  cas.set_desired_value("rank1");
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->CompareSet(&context, cas, &swapped).ok());
  }
  EXPECT_FALSE(swapped.swapped());
  EXPECT_EQ(swapped.value(), "rank0");

  v1::RendezvousNumKeysRequest num;
  Scope(num);
  v1::RendezvousNumKeysResponse counted;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->NumKeys(&context, num, &counted).ok());
  }
  EXPECT_EQ(counted.num_keys(), 2);

  v1::RendezvousDeleteRequest del;
  Scope(del);
  del.set_key("count");
  v1::RendezvousDeleteResponse deleted;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Delete(&context, del, &deleted).ok());
  }
  EXPECT_TRUE(deleted.deleted());

  v1::RendezvousCheckRequest check;
  Scope(check);
  check.add_keys("count");
  v1::RendezvousCheckResponse checked;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Check(&context, check, &checked).ok());
  }
  EXPECT_FALSE(checked.all_exist());
}

TEST_F(RendezvousServiceTest, UnopenedAttemptIsFailedPrecondition) {
  v1::RendezvousSetRequest request;
  Scope(request, /*attempt=*/2);
  request.set_key("k");
  v1::RendezvousSetResponse response;
  grpc::ClientContext context;
  grpc::Status status = stub_->Set(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("job 'job' attempt 2"));
}

// With an Authenticator every call needs the trainer credential of its scope (or an admin
// token): user and worker tokens, forged credentials and other scopes' credentials are refused,
// and the store is untouched by refused calls.
TEST(RendezvousServiceAuthTest, EveryCallNeedsItsScopesTrainerCredentialOrAnAdminToken) {
  testing::TempDir dir;
  const std::string tokens = dir / "tokens";
  {
    std::ofstream out(tokens);
    out << "user-token-0123456789 alice\n"
        << "admin-token-0123456789 root admin\n"
        << "worker-token-0123456789 node worker\n";
  }
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Load(tokens);
  ASSERT_TRUE(auth.ok()) << auth.status();
  RendezvousStore store;
  ASSERT_TRUE(store.OpenAttempt({"job", 1}).ok());
  const TrainerCredentials credentials("key-of-this-test");
  RendezvousService service(store, auth->get(), &credentials);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::Rendezvous::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  auto call = [&](const std::string& token, const std::string& key) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kServiceLiveness);
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::RendezvousSetRequest set;
    set.mutable_scope()->set_job_id("job");
    set.mutable_scope()->set_attempt(1);
    set.set_key(key);
    set.set_value("v");
    v1::RendezvousSetResponse response;
    return stub->Set(&context, set, &response);
  };
  auto wait = [&](const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kServiceLiveness);
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::RendezvousWaitRequest request;
    request.mutable_scope()->set_job_id("job");
    request.mutable_scope()->set_attempt(1);
    request.add_keys("w");
    SetTimeout(milliseconds(10), request.mutable_timeout());
    v1::RendezvousWaitResponse response;
    return stub->Wait(&context, request, &response);
  };

  const grpc::Status anonymous = call("", "a");
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call("no-such-token-0123456789", "a").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status user = call("user-token-0123456789", "a");
  EXPECT_EQ(user.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(user.error_message(), HasSubstr("'alice'"));
  EXPECT_EQ(wait("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status worker = call("worker-token-0123456789", "a");
  EXPECT_EQ(worker.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(worker.error_message(), HasSubstr("trainer credential"));
  // Another attempt's or job's credential, and one signed with another key.
  const grpc::Status other_attempt = call(credentials.Mint("job", 2, 0), "a");
  EXPECT_EQ(other_attempt.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(other_attempt.error_message(), HasSubstr("may not use the rendezvous of job 'job' attempt 1"));
  EXPECT_EQ(call(credentials.Mint("other-job", 1, 0), "a").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(call(TrainerCredentials("another-key").Mint("job", 1, 0), "a").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(store.NumKeys({"job", 1}).value_or(-1), 0);

  EXPECT_TRUE(call(credentials.Mint("job", 1, 3), "a").ok());
  EXPECT_TRUE(call("admin-token-0123456789", "b").ok());
  // Authorised, the wait runs and times out on the missing key (not an auth error).
  EXPECT_EQ(wait(credentials.Mint("job", 1, 0)).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(store.NumKeys({"job", 1}).value_or(-1), 2);

  store.Shutdown();
  server->Shutdown();
}

}  // namespace
}  // namespace deepnet::coordinator
