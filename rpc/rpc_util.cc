#include "rpc/rpc_util.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/status.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace deepnet::rpc {
namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": cannot be read"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": read failed"));
  return text.str();
}

const char* CodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return "OK";
    case absl::StatusCode::kCancelled: return "CANCELLED";
    case absl::StatusCode::kUnknown: return "UNKNOWN";
    case absl::StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound: return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case absl::StatusCode::kAborted: return "ABORTED";
    case absl::StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case absl::StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case absl::StatusCode::kInternal: return "INTERNAL";
    case absl::StatusCode::kUnavailable: return "UNAVAILABLE";
    case absl::StatusCode::kDataLoss: return "DATA_LOSS";
    case absl::StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("--coordinator: no address given (host:port)");
  }
  grpc::ChannelArguments args;
  // Reconnect quickly after a coordinator restart (default backoff grows to 120 s).
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  if (options.ca_cert_file.empty()) {
    if (!options.tls_server_name.empty()) {
      return absl::InvalidArgumentError("--tls-server-name needs --ca-cert (TLS)");
    }
    return grpc::CreateCustomChannel(options.address, grpc::InsecureChannelCredentials(), args);
  }
  absl::StatusOr<std::string> ca = ReadWholeFile(options.ca_cert_file, "--ca-cert");
  if (!ca.ok()) return ca.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = *ca;
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  return grpc::CreateCustomChannel(options.address, grpc::SslCredentials(ssl), args);
}

absl::Status WaitForConnected(const std::shared_ptr<grpc::Channel>& channel,
                              const std::string& address, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  if (channel->WaitForConnected(deadline)) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", address, " within ", timeout.count(), " ms"));
}

void PrepareContext(grpc::ClientContext* context, const std::string& token,
                    std::chrono::milliseconds timeout) {
  if (timeout.count() > 0) context->set_deadline(std::chrono::system_clock::now() + timeout);
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path, "token file");
  if (!text.ok()) return text.status();
  std::string first = text->substr(0, text->find('\n'));
  absl::StripAsciiWhitespace(&first);
  if (first.empty()) return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": empty"));
  return first;
}

absl::StatusOr<std::string> ResolveToken(const std::string& flag_value,
                                         const std::string& flag_file,
                                         const std::string& env_name) {
  if (!flag_value.empty()) return flag_value;
  if (!flag_file.empty()) return ReadTokenFile(flag_file);
  const std::string from_env = EnvOr(env_name.c_str(), "");
  if (!from_env.empty()) return from_env;
  const std::string file_env = env_name + "_FILE";
  const std::string env_file = EnvOr(file_env.c_str(), "");
  if (!env_file.empty()) return ReadTokenFile(env_file);
  return std::string();
}

std::string TruncateMessage(const std::string& message, size_t max_bytes) {
  if (message.size() <= max_bytes) return message;
  static constexpr char kSuffix[] = "... (truncated)";
  const size_t suffix = sizeof(kSuffix) - 1;
  size_t cut = max_bytes > suffix ? max_bytes - suffix : 0;
  // Back up over continuation bytes (10xxxxxx) so that no character is split.
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  return message.substr(0, cut) + kSuffix;
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      TruncateMessage(std::string(status.message())));
}

std::string Describe(const grpc::Status& status) {
  return absl::StrCat(CodeName(static_cast<absl::StatusCode>(status.error_code())), ": ",
                      status.error_message());
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty() && key_file.empty()) return grpc::InsecureServerCredentials();
  if (cert_file.empty() || key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key must be given together (TLS needs both)");
  }
  absl::StatusOr<std::string> cert = ReadWholeFile(cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadWholeFile(key_file, "--tls-key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(ssl);
}

void EnableHealthAndReflection() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
}

namespace {

class WithoutReflectionOption : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    const std::string reflection = grpc::reflection::ProtoServerReflectionPlugin().name();
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [&](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                                    return plugin->name() == reflection;
                                  }),
                   plugins->end());
  }
};

}  // namespace

std::unique_ptr<grpc::ServerBuilderOption> WithoutReflection() {
  return std::make_unique<WithoutReflectionOption>();
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

}  // namespace deepnet::rpc
