#include "comm/rendezvous_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "deepnet/v1/rendezvous.grpc.pb.h"

namespace deepnet::comm {

namespace v1 = deepnet::v1;
using Clock = std::chrono::system_clock;  // gRPC deadlines are system_clock time points.

namespace {

// A blocking call asks the server to wait at most this long; longer waits repeat the call, so
// that a coordinator that went away is noticed.
constexpr std::chrono::milliseconds kMaxServerWait{60000};

// gRPC and absl share the canonical codes; absl names them ("DEADLINE_EXCEEDED").
std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

void SetDuration(std::chrono::milliseconds duration, google::protobuf::Duration* out) {
  out->set_seconds(duration.count() / 1000);
  out->set_nanos(static_cast<int32_t>((duration.count() % 1000) * 1000000));
}

}  // namespace

struct RendezvousClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Rendezvous::Stub> stub;
  RendezvousOptions options;

  std::string Scope() const {
    return absl::StrCat("job '", options.job_id, "' attempt ", options.attempt);
  }
  void FillScope(v1::RendezvousScope* scope) const {
    scope->set_job_id(options.job_id);
    scope->set_attempt(options.attempt);
  }
  void Prepare(grpc::ClientContext& context, Clock::time_point deadline) const {
    context.set_deadline(deadline);
    // Wait for a connection (a coordinator restarting) until the deadline instead of failing
    // at once; a call is sent at most once, so retries never duplicate an add.
    context.set_wait_for_ready(true);
    if (!options.bearer_token.empty()) {
      context.AddMetadata("authorization", "Bearer " + options.bearer_token);
    }
  }
  Clock::time_point RpcDeadline() const { return Clock::now() + options.rpc_timeout; }
  // Describes a failed call: "rendezvous get of key 'k' (job 'j' attempt 1) at host:port
  // failed: DEADLINE_EXCEEDED: ...", with the call's code.
  absl::Status Error(const std::string& what, const grpc::Status& status) const {
    std::string text =
        absl::StrCat("rendezvous ", what, " (", Scope(), ") at ", options.address,
                     " failed: ", CodeName(status.error_code()), ": ", status.error_message());
    if (channel->GetState(false) != GRPC_CHANNEL_READY &&
        (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         status.error_code() == grpc::StatusCode::UNAVAILABLE)) {
      absl::StrAppend(&text, " (no connection to the rendezvous service at ", options.address, ")");
    }
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), text);
  }

  // Runs a blocking call: `call(context, server_wait)` asks the server to wait at most
  // server_wait; it is repeated in pieces of at most kMaxServerWait while the server answers
  // DEADLINE_EXCEEDED, until `timeout` (0: forever) has passed.
  template <typename Call>
  absl::Status Blocking(std::chrono::milliseconds timeout, const std::string& what,
                        Call call) const {
    const bool forever = timeout.count() == 0;
    const Clock::time_point end = Clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
      const std::chrono::milliseconds piece =
          forever ? kMaxServerWait : std::clamp(left, std::chrono::milliseconds(0), kMaxServerWait);
      grpc::ClientContext context;
      // The grace lets the server's answer (which names the missing keys) arrive first.
      Prepare(context, Clock::now() + piece + options.rpc_timeout);
      const grpc::Status status = call(context, piece);
      if (status.ok()) return absl::OkStatus();
      const bool time_left = forever || Clock::now() < end;
      if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED || !time_left) {
        return Error(what, status);
      }
    }
  }
};

RendezvousClient::RendezvousClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RendezvousClient::~RendezvousClient() = default;

const RendezvousOptions& RendezvousClient::options() const { return impl_->options; }

absl::StatusOr<std::shared_ptr<const RendezvousClient>> RendezvousClient::Create(
    const RendezvousOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("rendezvous store: empty coordinator address");
  }
  return Create(grpc::CreateChannel(options.address, grpc::InsecureChannelCredentials()), options);
}

absl::StatusOr<std::shared_ptr<const RendezvousClient>> RendezvousClient::Create(
    std::shared_ptr<grpc::Channel> channel, const RendezvousOptions& options) {
  if (!channel) return absl::InvalidArgumentError("rendezvous store: null channel");
  if (options.job_id.empty()) return absl::InvalidArgumentError("rendezvous store: empty job id");
  if (options.rpc_timeout.count() <= 0 || options.timeout.count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous store: rpc_timeout must be > 0 and timeout >= 0 (got ",
                     options.rpc_timeout.count(), " ms and ", options.timeout.count(), " ms)"));
  }
  auto impl = std::make_unique<Impl>();
  impl->channel = std::move(channel);
  impl->stub = v1::Rendezvous::NewStub(impl->channel);
  impl->options = options;
  if (!impl->channel->WaitForConnected(impl->RpcDeadline())) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to the rendezvous service at ", options.address, " within ",
                     options.rpc_timeout.count(), " ms (", impl->Scope(), ")"));
  }
  // An empty Check proves that the coordinator serves the scope.
  v1::RendezvousCheckRequest request;
  impl->FillScope(request.mutable_scope());
  v1::RendezvousCheckResponse response;
  grpc::ClientContext context;
  impl->Prepare(context, impl->RpcDeadline());
  const grpc::Status status = impl->stub->Check(&context, request, &response);
  if (!status.ok()) return impl->Error("check", status);
  return std::make_shared<const RendezvousClient>(std::move(impl));
}

absl::Status RendezvousClient::Set(const std::string& key, const std::string& value) const {
  v1::RendezvousSetRequest request;
  impl_->FillScope(request.mutable_scope());
  request.set_key(key);
  request.set_value(value);
  v1::RendezvousSetResponse response;
  grpc::ClientContext context;
  impl_->Prepare(context, impl_->RpcDeadline());
  const grpc::Status status = impl_->stub->Set(&context, request, &response);
  if (!status.ok()) return impl_->Error(absl::StrCat("set of key '", key, "'"), status);
  return absl::OkStatus();
}

absl::StatusOr<std::string> RendezvousClient::CompareSet(const std::string& key,
                                                         const std::string& expected,
                                                         const std::string& desired) const {
  auto call = [&](bool expect_missing) -> absl::StatusOr<v1::RendezvousCompareSetResponse> {
    v1::RendezvousCompareSetRequest request;
    impl_->FillScope(request.mutable_scope());
    request.set_key(key);
    if (!expect_missing) request.set_expected_value(expected);
    request.set_desired_value(desired);
    v1::RendezvousCompareSetResponse response;
    grpc::ClientContext context;
    impl_->Prepare(context, impl_->RpcDeadline());
    const grpc::Status status = impl_->stub->CompareSet(&context, request, &response);
    if (!status.ok()) return impl_->Error(absl::StrCat("compare-set of key '", key, "'"), status);
    return response;
  };
  absl::StatusOr<v1::RendezvousCompareSetResponse> response = call(expected.empty());
  if (response.ok() && expected.empty() && !response->swapped() && response->has_value() &&
      response->value().empty()) {
    response = call(false);  // The key exists with the empty value the caller expects.
  }
  if (!response.ok()) return response.status();
  if (!response->has_value()) return expected;
  return response->value();
}

absl::StatusOr<std::string> RendezvousClient::Get(const std::string& key,
                                                  std::chrono::milliseconds timeout) const {
  v1::RendezvousGetRequest request;
  impl_->FillScope(request.mutable_scope());
  request.set_key(key);
  v1::RendezvousGetResponse response;
  absl::Status status = impl_->Blocking(
      timeout, absl::StrCat("get of key '", key, "'"),
      [&](grpc::ClientContext& context, std::chrono::milliseconds server_wait) {
        // Zero would mean "do not wait" (NOT_FOUND); wait at least 1 ms.
        SetDuration(std::max(server_wait, std::chrono::milliseconds(1)), request.mutable_timeout());
        return impl_->stub->Get(&context, request, &response);
      });
  if (!status.ok()) return status;
  return response.value();
}

absl::StatusOr<int64_t> RendezvousClient::Add(const std::string& key, int64_t delta) const {
  v1::RendezvousAddRequest request;
  impl_->FillScope(request.mutable_scope());
  request.set_key(key);
  request.set_delta(delta);
  v1::RendezvousAddResponse response;
  grpc::ClientContext context;
  impl_->Prepare(context, impl_->RpcDeadline());
  const grpc::Status status = impl_->stub->Add(&context, request, &response);
  if (!status.ok()) return impl_->Error(absl::StrCat("add to key '", key, "'"), status);
  return response.value();
}

absl::StatusOr<bool> RendezvousClient::Delete(const std::string& key) const {
  v1::RendezvousDeleteRequest request;
  impl_->FillScope(request.mutable_scope());
  request.set_key(key);
  v1::RendezvousDeleteResponse response;
  grpc::ClientContext context;
  impl_->Prepare(context, impl_->RpcDeadline());
  const grpc::Status status = impl_->stub->Delete(&context, request, &response);
  if (!status.ok()) return impl_->Error(absl::StrCat("delete of key '", key, "'"), status);
  return response.deleted();
}

absl::StatusOr<bool> RendezvousClient::Check(const std::vector<std::string>& keys) const {
  v1::RendezvousCheckRequest request;
  impl_->FillScope(request.mutable_scope());
  for (const std::string& key : keys) request.add_keys(key);
  v1::RendezvousCheckResponse response;
  grpc::ClientContext context;
  impl_->Prepare(context, impl_->RpcDeadline());
  const grpc::Status status = impl_->stub->Check(&context, request, &response);
  if (!status.ok()) {
    return impl_->Error(absl::StrCat("check of keys '", absl::StrJoin(keys, "', '"), "'"), status);
  }
  return response.all_exist();
}

absl::StatusOr<int64_t> RendezvousClient::NumKeys() const {
  v1::RendezvousNumKeysRequest request;
  impl_->FillScope(request.mutable_scope());
  v1::RendezvousNumKeysResponse response;
  grpc::ClientContext context;
  impl_->Prepare(context, impl_->RpcDeadline());
  const grpc::Status status = impl_->stub->NumKeys(&context, request, &response);
  if (!status.ok()) return impl_->Error("key count", status);
  return response.num_keys();
}

absl::Status RendezvousClient::Wait(const std::vector<std::string>& keys,
                                    std::chrono::milliseconds timeout) const {
  v1::RendezvousWaitRequest request;
  impl_->FillScope(request.mutable_scope());
  for (const std::string& key : keys) request.add_keys(key);
  v1::RendezvousWaitResponse response;
  return impl_->Blocking(timeout, absl::StrCat("wait for keys '", absl::StrJoin(keys, "', '"), "'"),
                         [&](grpc::ClientContext& context, std::chrono::milliseconds server_wait) {
                           SetDuration(server_wait, request.mutable_timeout());
                           return impl_->stub->Wait(&context, request, &response);
                         });
}

}  // namespace deepnet::comm
