#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/rendezvous_client.h"

namespace deepnet::comm {

// Address, job attempt, timeouts and token of the rendezvous (comm/rendezvous_client.h).
using GrpcStoreOptions = RendezvousOptions;

/// A c10d::Store whose keys live in the coordinator's rendezvous store, scoped to one job
/// attempt, so that the ranks of a job bootstrap Gloo (or NCCL: the unique id travels as a
/// key) through the coordinator. Every call has a deadline: get/wait wait at most the store's
/// timeout (the server answers with the missing keys), the others at most rpc_timeout. Calls
/// made while the coordinator is unreachable wait for it until their deadline. Failures throw
/// c10::Error (c10d's convention) naming the operation, key, job attempt and address. Safe for
/// concurrent use (one gRPC channel; clone() shares it). The gRPC and protobuf code lives in the
/// LibTorch-free RendezvousClient, so that no translation unit sees both LibTorch and protobuf.
class GrpcStore final : public c10d::Store {
 private:
  struct Token {};

 public:
  // Connects over a plaintext channel to options.address. InvalidArgument for bad options;
  // Unavailable naming the address when no connection is made within options.rpc_timeout;
  // FailedPrecondition when the coordinator has no open rendezvous for (job_id, attempt).
  [[nodiscard]] static absl::StatusOr<c10::intrusive_ptr<GrpcStore>> Create(
      const GrpcStoreOptions& options);
  // The same over a channel the caller made (e.g. with TLS credentials).
  [[nodiscard]] static absl::StatusOr<c10::intrusive_ptr<GrpcStore>> Create(
      std::shared_ptr<grpc::Channel> channel, const GrpcStoreOptions& options);

  GrpcStore(Token, std::shared_ptr<const RendezvousClient> client,
            std::chrono::milliseconds timeout);
  ~GrpcStore() override;

  // c10d::Store:
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key,
                                  const std::vector<uint8_t>& expected_value,
                                  const std::vector<uint8_t>& desired_value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  // Another handle on the same channel and scope (a pure virtual of c10d::Store in newer
  // LibTorch; a plain method in 1.13, hence no `override`).
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Winconsistent-missing-override"
#endif
  c10::intrusive_ptr<c10d::Store> clone();
#if defined(__clang__)
#pragma clang diagnostic pop
#endif

  const std::string& address() const;

 private:
  std::shared_ptr<const RendezvousClient> client_;
};

}  // namespace deepnet::comm
