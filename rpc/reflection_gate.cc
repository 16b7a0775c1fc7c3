#include "rpc/reflection_gate.h"

#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "rpc/rpc_util.h"

namespace deepnet::rpc {
namespace {

constexpr const char* kReflectionPrefix = "/grpc.reflection.";

// A call refused before it starts.
class Refused : public grpc::ServerGenericBidiReactor {
 public:
  explicit Refused(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// One reflection call relayed to the private server. Reflection answers every request with
// one response, so the relay goes in lockstep: read from the caller, write to the private
// server, read its answer, write it to the caller, again; at most one operation is pending on
// each side. Nothing is started on a side after it finished; the relay is deleted once both
// calls are done (gRPC calls OnDone after every pending operation has completed).
class Relay {
 public:
  static grpc::ServerGenericBidiReactor* Start(grpc::GenericStub& stub, const std::string& method) {
    auto* relay = new Relay(stub, method);
    return &relay->caller_;
  }

 private:
  struct CallerSide : grpc::ServerGenericBidiReactor {
    Relay* relay = nullptr;
    void OnReadDone(bool ok) override { relay->FromCaller(ok); }
    void OnWriteDone(bool ok) override { relay->ToCallerDone(ok); }
    void OnCancel() override { relay->inner_context_.TryCancel(); }
    void OnDone() override { relay->Release(); }
  };
  struct InnerSide : grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
    Relay* relay = nullptr;
    void OnWriteDone(bool ok) override { relay->ToInnerDone(ok); }
    void OnReadDone(bool ok) override { relay->FromInner(ok); }
    void OnDone(const grpc::Status& status) override { relay->InnerDone(status); }
  };

  Relay(grpc::GenericStub& stub, const std::string& method) {
    caller_.relay = this;
    inner_.relay = this;
    std::lock_guard<std::mutex> lock(mu_);
    stub.PrepareBidiStreamingCall(&inner_context_, method, grpc::StubOptions(), &inner_);
    inner_.StartCall();
    caller_.StartRead(&request_);
  }

  void FromCaller(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    if (inner_done_) return;
    if (ok) {
      inner_.StartWrite(&request_);
    } else {
      inner_.StartWritesDone();  // the caller has no more requests
    }
  }
  void ToInnerDone(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ok && !inner_done_) inner_.StartRead(&response_);
  }
  void FromInner(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ok && !caller_finished_) caller_.StartWrite(&response_);
    // !ok: the private call ended; InnerDone finishes the caller's with its status.
  }
  void ToCallerDone(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok) {
      inner_context_.TryCancel();  // the caller went away
    } else if (!caller_finished_) {
      caller_.StartRead(&request_);
    }
  }
  void InnerDone(const grpc::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      inner_done_ = true;
      if (!caller_finished_) {
        caller_finished_ = true;
        caller_.Finish(status);
      }
    }
    Release();
  }
  void Release() {
    if (--alive_ == 0) delete this;
  }

  CallerSide caller_;
  InnerSide inner_;
  grpc::ClientContext inner_context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  std::mutex mu_;
  bool inner_done_ = false;
  bool caller_finished_ = false;
  std::atomic<int> alive_{2};
};

}  // namespace

class ReflectionGate::Generic : public grpc::CallbackGenericService {
 public:
  Generic(grpc::GenericStub& stub, Check check) : stub_(stub), check_(std::move(check)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    if (!absl::StartsWith(context->method(), kReflectionPrefix)) {
      return new Refused(
          grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "unknown method " + context->method()));
    }
    if (grpc::Status status = check_(*context); !status.ok()) return new Refused(status);
    return Relay::Start(stub_, context->method());
  }

 private:
  grpc::GenericStub& stub_;
  const Check check_;
};

absl::StatusOr<std::unique_ptr<ReflectionGate>> ReflectionGate::Create(
    std::vector<std::unique_ptr<grpc::Service>> listed, Check check) {
  std::unique_ptr<ReflectionGate> gate(new ReflectionGate());
  gate->listed_ = std::move(listed);
  grpc::ServerBuilder builder;  // no port: reached only through its in-process channel
  for (const std::unique_ptr<grpc::Service>& service : gate->listed_) {
    builder.RegisterService(service.get());
  }
  gate->inner_ = builder.BuildAndStart();
  if (gate->inner_ == nullptr) {
    return absl::InternalError("server reflection: the private server did not start");
  }
  gate->stub_ =
      std::make_unique<grpc::GenericStub>(gate->inner_->InProcessChannel(grpc::ChannelArguments()));
  gate->generic_ = std::make_unique<Generic>(*gate->stub_, std::move(check));
  return gate;
}

ReflectionGate::~ReflectionGate() {
  if (inner_ != nullptr) inner_->Shutdown(std::chrono::system_clock::now());
}

void ReflectionGate::AttachTo(grpc::ServerBuilder& builder) {
  builder.SetOption(WithoutReflection());
  builder.RegisterCallbackGenericService(generic_.get());
}

}  // namespace deepnet::rpc
