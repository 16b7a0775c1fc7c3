#pragma once
// gRPC plumbing shared by every daemon and client of the control plane (deepnet-coordinator,
// deepnet-worker, deepnetctl, the trainer's rendezvous store): channels with optional TLS,
// bearer tokens, deadlines, status conversion and the server-side health/reflection setup.
// Torch-free; links gRPC, Protobuf and Abseil only.

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class Channel;
class ClientContext;
class ServerBuilder;
class ServerBuilderOption;
class ServerCredentials;
class Status;
}  // namespace grpc

namespace deepnet::rpc {

// How a client reaches a daemon.
struct ChannelOptions {
  // host:port (or any gRPC target, e.g. "unix:/path").
  std::string address;
  // PEM file of the CA that signed the server's certificate; non-empty turns TLS on.
  std::string ca_cert_file;
  // Name the server certificate must carry, when it differs from the address's host (tests,
  // port-forwards). Only with TLS.
  std::string tls_server_name;
};

// A channel to options.address (TLS when ca_cert_file is set). INVALID_ARGUMENT naming the flag
// for an empty address or an unreadable CA file. Does not connect: the first call does.
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const ChannelOptions& options);

// Waits up to `timeout` for the channel to be connected; UNAVAILABLE naming `address` if not.
[[nodiscard]] absl::Status WaitForConnected(const std::shared_ptr<grpc::Channel>& channel,
                                            const std::string& address,
                                            std::chrono::milliseconds timeout);

// Sets the call's deadline (now + timeout; zero or negative leaves none, for long streams) and,
// when `token` is non-empty, the "authorization: Bearer <token>" metadata the servers check.
void PrepareContext(grpc::ClientContext* context, const std::string& token,
                    std::chrono::milliseconds timeout);

// The first line of a token file, without surrounding whitespace. INVALID_ARGUMENT naming the
// path when it cannot be read or is empty.
[[nodiscard]] absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Token from (in order) `flag_value`, the file `flag_file`, the environment variable
// `env_name`, the file named by `env_name`_FILE; empty when none is set.
[[nodiscard]] absl::StatusOr<std::string> ResolveToken(const std::string& flag_value,
                                                       const std::string& flag_file,
                                                       const std::string& env_name);

// The longest status message a service sends (docs/OPERATIONS.md, "Error sizes"): far below
// gRPC's 8 KiB metadata limit, whatever a request contained.
inline constexpr size_t kMaxStatusMessageBytes = 4096;

// `message` cut to at most `max_bytes` on a UTF-8 character boundary, ending in
// "... (truncated)" when cut.
std::string TruncateMessage(const std::string& message, size_t max_bytes = kMaxStatusMessageBytes);

// The same code and message as a grpc::Status, for a service handler's answer; the message is
// truncated to kMaxStatusMessageBytes.
grpc::Status ToGrpc(const absl::Status& status);

// "CODE_NAME: message", e.g. "NOT_FOUND: job j-000042 does not exist".
std::string Describe(const grpc::Status& status);

// Server credentials: TLS with the PEM certificate chain and key when both files are given,
// insecure when both are empty; INVALID_ARGUMENT naming the flag otherwise (one without the
// other, unreadable file).
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const std::string& cert_file, const std::string& key_file);

// Registers the standard grpc.health.v1.Health service (every service SERVING) and server
// reflection on builds made after this call. Call once before creating a ServerBuilder.
void EnableHealthAndReflection();

// A ServerBuilder option (builder.SetOption) that leaves server reflection out of that server,
// for a daemon started with reflection turned off.
std::unique_ptr<grpc::ServerBuilderOption> WithoutReflection();

// The value of environment variable `name`, or `fallback` when unset or empty.
std::string EnvOr(const char* name, const std::string& fallback);

}  // namespace deepnet::rpc
