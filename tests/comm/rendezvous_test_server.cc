#include "tests/comm/rendezvous_test_server.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "coordinator/rendezvous/rendezvous_service.h"
#include "deepnet/v1/rendezvous.pb.h"

namespace deepnet::testing {

struct RendezvousTestServer::Impl {
  coordinator::RendezvousStore store;
  coordinator::RendezvousService service{store};
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

RendezvousTestServer::RendezvousTestServer() : impl_(std::make_unique<Impl>()) {}

RendezvousTestServer::~RendezvousTestServer() { Stop(); }

absl::Status RendezvousTestServer::Start() {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&impl_->service);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || port <= 0) return absl::InternalError("cannot start a gRPC server");
  impl_->address = "127.0.0.1:" + std::to_string(port);
  return absl::OkStatus();
}

absl::Status RendezvousTestServer::OpenAttempt(const std::string& job_id, int attempt) {
  return impl_->store.OpenAttempt({job_id, attempt});
}

void RendezvousTestServer::Stop() {
  if (!impl_->server) return;
  impl_->store.Shutdown();
  impl_->server->Shutdown();
  impl_->server.reset();
}

const std::string& RendezvousTestServer::address() const { return impl_->address; }

coordinator::RendezvousStore& RendezvousTestServer::store() { return impl_->store; }

std::string SerializeSetRequest(const std::string& job_id, const std::string& key,
                                const std::string& value) {
  deepnet::v1::RendezvousSetRequest request;
  request.mutable_scope()->set_job_id(job_id);
  request.set_key(key);
  request.set_value(value);
  return request.SerializeAsString();
}

absl::StatusOr<std::pair<std::string, std::string>> ParseSetRequest(const std::string& wire) {
  deepnet::v1::RendezvousSetRequest parsed;
  if (!parsed.ParseFromString(wire)) return absl::InvalidArgumentError("unparsable request");
  return std::make_pair(parsed.scope().job_id(), parsed.value());
}

}  // namespace deepnet::testing
