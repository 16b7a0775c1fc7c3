#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace deepnet::comm {

struct RendezvousOptions {
  // host:port of the coordinator's deepnet.v1.Rendezvous service.
  std::string address;
  // The scope of the store's keys: the job and its attempt (opened by the coordinator).
  std::string job_id;
  int attempt = 0;
  // c10d store timeout: how long get() and wait() wait for missing keys; 0 waits forever.
  std::chrono::milliseconds timeout{300000};
  // Deadline of every other call (set, add, check, ...), and how long Create waits to connect;
  // also the grace added to a blocking call's deadline. > 0.
  std::chrono::milliseconds rpc_timeout{30000};
  // Sent as "authorization: Bearer <token>" with every call; empty sends none.
  std::string bearer_token;
};

/// The client side of the coordinator's Rendezvous service for one job attempt: the gRPC and
/// protobuf half of GrpcStore (comm/grpc_store.h), kept in a LibTorch-free target
/// (deepnet_comm_rendezvous) so that no translation unit sees both LibTorch's and protobuf's
/// headers (a PyTorch 2.x package ships protobuf headers that would shadow the system's). Values
/// are bytes in std::string. A failed call returns the gRPC code with a message naming the
/// operation, key, job attempt and address. Blocking calls (Get, Wait) wait at most `timeout`
/// (0: forever), the others at most options.rpc_timeout. Safe for concurrent use.
class RendezvousClient {
 public:
  // Connects over a plaintext channel to options.address. InvalidArgument for bad options;
  // Unavailable naming the address when no connection is made within options.rpc_timeout;
  // FailedPrecondition when the coordinator has no open rendezvous for (job_id, attempt).
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const RendezvousClient>> Create(
      const RendezvousOptions& options);
  // The same over a channel the caller made (e.g. with TLS credentials).
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const RendezvousClient>> Create(
      std::shared_ptr<grpc::Channel> channel, const RendezvousOptions& options);
  ~RendezvousClient();

  const RendezvousOptions& options() const;

  absl::Status Set(const std::string& key, const std::string& value) const;
  // c10d's compareSet: an empty expected value matches a missing key (and an empty value); a
  // missing key with a non-empty expected value returns the expected value unchanged.
  absl::StatusOr<std::string> CompareSet(const std::string& key, const std::string& expected,
                                         const std::string& desired) const;
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) const;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) const;
  absl::StatusOr<bool> Delete(const std::string& key) const;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) const;
  absl::StatusOr<int64_t> NumKeys() const;
  absl::Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) const;

  struct Impl;
  explicit RendezvousClient(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepnet::comm
