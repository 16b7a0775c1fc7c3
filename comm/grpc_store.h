#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/statusor.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace deepnet::comm {

struct GrpcStoreOptions {
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

/// A c10d::Store whose keys live in the coordinator's rendezvous store, scoped to one job
/// attempt, so that the ranks of a job bootstrap Gloo (or NCCL: the unique id travels as a
/// key) through the coordinator. Every call has a deadline: get/wait wait at most the store's
/// timeout (the server answers with the missing keys), the others at most rpc_timeout. Calls
/// made while the coordinator is unreachable wait for it until their deadline. Failures throw
/// c10::Error (c10d's convention) naming the operation, key, job attempt and address. Safe for
/// concurrent use (one gRPC channel; clone() shares it).
class GrpcStore final : public c10d::Store {
 private:
  struct Impl;
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

  GrpcStore(Token, std::shared_ptr<const Impl> impl, std::chrono::milliseconds timeout);
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
  std::shared_ptr<const Impl> impl_;
};

}  // namespace deepnet::comm
