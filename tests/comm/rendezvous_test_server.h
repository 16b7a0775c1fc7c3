#pragma once

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/rendezvous/rendezvous_store.h"

namespace deepnet::testing {

/// The coordinator's Rendezvous service on 127.0.0.1 at a port the OS picks, for GrpcStore's
/// tests. Kept in a LibTorch-free target (deepnet_rendezvous_test_server): the test itself sees
/// LibTorch, and no translation unit may see both LibTorch and gRPC/protobuf headers.
class RendezvousTestServer {
 public:
  RendezvousTestServer();
  ~RendezvousTestServer();  // Stop()s.

  // Starts serving; the address is then "127.0.0.1:<port>".
  [[nodiscard]] absl::Status Start();
  [[nodiscard]] absl::Status OpenAttempt(const std::string& job_id, int attempt);
  // Shuts the rendezvous store and the server down (idempotent).
  void Stop();
  const std::string& address() const;
  // The store behind the service (open and drop attempts, count waiters).
  coordinator::RendezvousStore& store();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A deepnet.v1.RendezvousSetRequest (job, key, value) serialized, and the job id and value parsed
// back from such bytes: our generated protobuf code at work in a process that also loads
// LibTorch's and SentencePiece's protobufs.
std::string SerializeSetRequest(const std::string& job_id, const std::string& key,
                                const std::string& value);
absl::StatusOr<std::pair<std::string, std::string>> ParseSetRequest(const std::string& wire);

}  // namespace deepnet::testing
