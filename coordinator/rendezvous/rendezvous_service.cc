#include "coordinator/rendezvous/rendezvous_service.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/rpc_util.h"

namespace deepnet::coordinator {

namespace v1 = deepnet::v1;
using Clock = RendezvousStore::Clock;

namespace {

// absl and gRPC share the canonical status codes; the message is capped (rpc::ToGrpc).
grpc::Status ToGrpcStatus(const absl::Status& status) { return rpc::ToGrpc(status); }

RendezvousScope ToScope(const v1::RendezvousScope& scope) {
  return RendezvousScope{scope.job_id(), scope.attempt()};
}

// When a blocking call must end: after the request's timeout, and never after the client's
// own deadline (the client would not see the answer).
Clock::time_point WaitDeadline(const grpc::CallbackServerContext& context,
                               const google::protobuf::Duration& timeout) {
  const Clock::time_point now = Clock::now();
  // At most a day: a larger request (up to protobuf's 10,000 years) would overflow the clock.
  constexpr int64_t kMaxWaitSeconds = 24 * 3600;
  const auto wait =
      std::chrono::seconds(std::clamp<int64_t>(timeout.seconds(), 0, kMaxWaitSeconds)) +
      std::chrono::nanoseconds(std::max<int32_t>(timeout.nanos(), 0));
  Clock::time_point deadline = now + std::chrono::duration_cast<Clock::duration>(wait);
  const auto client_deadline = context.deadline();
  if (client_deadline != std::chrono::system_clock::time_point::max()) {
    const auto left = client_deadline - std::chrono::system_clock::now();
    deadline = std::min(deadline, now + std::chrono::duration_cast<Clock::duration>(left));
  }
  return deadline;
}

// Finishes a unary call at once with `status`.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A Get or Wait in progress: waits in the store without holding a thread, finishes when the
// store completes the wait, and cancels the wait when the client goes away. Deletes itself.
class WaitReactor final : public grpc::ServerUnaryReactor {
 public:
  using OnValues = std::function<void(std::vector<std::string>&)>;

  explicit WaitReactor(RendezvousStore& store) : store_(store) {}

  // Must be the last use of `this` by the caller: the reactor may finish (and be deleted by
  // gRPC) from another thread as soon as the wait is registered.
  void Start(const RendezvousScope& scope, std::vector<std::string> keys,
             Clock::time_point deadline, OnValues on_values) {
    store_.WaitAsync(
        scope, std::move(keys), deadline,
        [this, on_values = std::move(on_values)](absl::StatusOr<std::vector<std::string>> values) {
          if (values.ok()) on_values(*values);
          Finish(ToGrpcStatus(values.status()));
        },
        &id_);
  }

  void OnCancel() override {
    // id_ was written before gRPC could call this (the reactor is returned after Start).
    store_.CancelWait(id_, "rendezvous call cancelled by the client");
  }
  void OnDone() override { delete this; }

 private:
  RendezvousStore& store_;
  RendezvousStore::WaiterId id_ = 0;
};

}  // namespace

absl::Status RendezvousService::Authorize(const grpc::CallbackServerContext& context,
                                          const v1::RendezvousScope& scope) const {
  if (auth_ == nullptr) return absl::OkStatus();
  absl::StatusOr<absl::string_view> token = BearerToken(context.client_metadata());
  if (!token.ok()) return token.status();
  if (credentials_ != nullptr && TrainerCredentials::LooksLikeCredential(*token)) {
    absl::StatusOr<TrainerGrant> grant = credentials_->Verify(*token);
    if (!grant.ok()) return grant.status();
    if (grant->job_id != scope.job_id() || grant->attempt != scope.attempt()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the trainer credential of rank ", grant->rank, " of ",
          ToString(RendezvousScope{grant->job_id, grant->attempt}),
          " may not use the rendezvous of ", ToString(ToScope(scope))));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<Principal> principal = auth_->Authenticate(context);
  if (!principal.ok()) return principal.status();
  if (principal->role == Role::kAdmin) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("user '", principal->user, "' (role ", RoleName(principal->role),
                   ") may not use the rendezvous: it takes the trainer credential of its "
                   "attempt, which the coordinator gives each rank (or an admin token)"));
}

grpc::ServerUnaryReactor* RendezvousService::Set(grpc::CallbackServerContext* context,
                                                 const v1::RendezvousSetRequest* request,
                                                 v1::RendezvousSetResponse* /*response*/) {
  if (absl::Status allowed = Authorize(*context, request->scope()); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  return FinishNow(context, store_.Set(ToScope(request->scope()), request->key(),
                                       std::string(request->value())));
}

grpc::ServerUnaryReactor* RendezvousService::Get(grpc::CallbackServerContext* context,
                                                 const v1::RendezvousGetRequest* request,
                                                 v1::RendezvousGetResponse* response) {
  if (absl::Status allowed = Authorize(*context, request->scope()); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  const RendezvousScope scope = ToScope(request->scope());
  if (request->key().empty()) {
    return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                                  "rendezvous get in ", ToString(scope), ": empty key")));
  }
  if (!request->has_timeout() ||
      (request->timeout().seconds() == 0 && request->timeout().nanos() == 0)) {
    // No wait: answer NOT_FOUND for a missing key rather than a deadline error.
    absl::StatusOr<bool> exists = store_.Check(scope, {request->key()});
    if (exists.ok() && !*exists) {
      return FinishNow(context,
                       absl::NotFoundError(absl::StrCat("rendezvous key '", request->key(), "' of ",
                                                        ToString(scope), " does not exist")));
    }
    if (!exists.ok()) return FinishNow(context, exists.status());
  }
  auto* reactor = new WaitReactor(store_);
  reactor->Start(scope, {request->key()}, WaitDeadline(*context, request->timeout()),
                 [response](std::vector<std::string>& values) {
                   response->set_value(std::move(values.front()));
                 });
  return reactor;
}

grpc::ServerUnaryReactor* RendezvousService::Add(grpc::CallbackServerContext* context,
                                                 const v1::RendezvousAddRequest* request,
                                                 v1::RendezvousAddResponse* response) {
  if (absl::Status allowed = Authorize(*context, request->scope()); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::StatusOr<int64_t> sum =
      store_.Add(ToScope(request->scope()), request->key(), request->delta());
  if (sum.ok()) response->set_value(*sum);
  return FinishNow(context, sum.status());
}

grpc::ServerUnaryReactor* RendezvousService::Wait(grpc::CallbackServerContext* context,
                                                  const v1::RendezvousWaitRequest* request,
                                                  v1::RendezvousWaitResponse* /*response*/) {
  if (absl::Status allowed = Authorize(*context, request->scope()); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  auto* reactor = new WaitReactor(store_);
  reactor->Start(ToScope(request->scope()),
                 std::vector<std::string>(request->keys().begin(), request->keys().end()),
                 WaitDeadline(*context, request->timeout()), [](std::vector<std::string>&) {});
  return reactor;
}

grpc::ServerUnaryReactor* RendezvousService::Check(grpc::CallbackServerContext* context,
                                                   const v1::RendezvousCheckRequest* request,
                                                   v1::RendezvousCheckResponse* response) {
  if (absl::Status allowed = Authorize(*context, request->scope()); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::StatusOr<bool> all =
      store_.Check(ToScope(request->scope()),
                   std::vector<std::string>(request->keys().begin(), request->keys().end()));
  if (all.ok()) response->set_all_exist(*all);
  return FinishNow(context, all.status());
}

grpc::ServerUnaryReactor* RendezvousService::Delete(grpc::CallbackServerContext* context,
                                                    const v1::RendezvousDeleteRequest* request,
                                                    v1::RendezvousDeleteResponse* response) {
  if (absl::Status allowed = Authorize(*context, request->scope()); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::StatusOr<bool> deleted = store_.Delete(ToScope(request->scope()), request->key());
  if (deleted.ok()) response->set_deleted(*deleted);
  return FinishNow(context, deleted.status());
}

grpc::ServerUnaryReactor* RendezvousService::CompareSet(
    grpc::CallbackServerContext* context, const v1::RendezvousCompareSetRequest* request,
    v1::RendezvousCompareSetResponse* response) {
  if (absl::Status allowed = Authorize(*context, request->scope()); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  std::optional<std::string> expected;
  if (request->has_expected_value()) expected = request->expected_value();
  absl::StatusOr<CompareSetResult> result =
      store_.CompareSet(ToScope(request->scope()), request->key(), std::move(expected),
                        std::string(request->desired_value()));
  if (result.ok()) {
    response->set_swapped(result->swapped);
    if (result->value.has_value()) response->set_value(std::move(*result->value));
  }
  return FinishNow(context, result.status());
}

grpc::ServerUnaryReactor* RendezvousService::NumKeys(grpc::CallbackServerContext* context,
                                                     const v1::RendezvousNumKeysRequest* request,
                                                     v1::RendezvousNumKeysResponse* response) {
  if (absl::Status allowed = Authorize(*context, request->scope()); !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::StatusOr<int64_t> count = store_.NumKeys(ToScope(request->scope()));
  if (count.ok()) response->set_num_keys(*count);
  return FinishNow(context, count.status());
}

}  // namespace deepnet::coordinator
