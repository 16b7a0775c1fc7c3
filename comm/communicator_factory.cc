#include "comm/communicator_factory.h"

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <torch/cuda.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/communicator_checks.h"
#include "comm/gloo_address.h"
#include "comm/grpc_store.h"
#include "comm/launch_env.h"
#include "comm/loopback_communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_launch_check.h"
#include "comm/staged_communicator.h"
#include "rpc/rpc_util.h"
#ifdef DEEPNET_HAVE_GLOO
#include "comm/gloo_communicator.h"
#endif
#ifdef DEEPNET_HAVE_NCCL
#include "comm/nccl_communicator.h"
#endif

namespace deepnet::comm {
namespace {

constexpr char kTcpScheme[] = "tcp://";
constexpr char kFileScheme[] = "file://";
constexpr char kGrpcScheme[] = "grpc://";

std::string ExceptionText(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e))
    return error->what_without_backtrace();
  return e.what();
}

// Keeps letters, digits, '-', '_' and '.' of a job id for use in a file name.
std::string FileNameSafe(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) c = '_';
  }
  return out;
}

absl::StatusOr<c10::intrusive_ptr<c10d::Store>> OpenTcpStore(const std::string& host, int port,
                                                             const CommOptions& options,
                                                             const LaunchEnv& env) {
  const std::string label = internal::RankLabel(env.rank, env.world_size);
  try {
    c10d::TCPStoreOptions tcp;
    tcp.port = static_cast<std::uint16_t>(port);
    tcp.isServer = env.rank == 0;
    tcp.numWorkers = env.world_size;
    tcp.waitWorkers = true;
    tcp.timeout = options.timeout;
    return c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::TCPStore>(host, tcp));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(label, ": rendezvous at tcp://", host, ":", port,
                     env.rank == 0 ? " (serving)" : "", " did not complete within ",
                     internal::FormatDuration(options.timeout), ": ", ExceptionText(e)));
  }
}

absl::StatusOr<c10::intrusive_ptr<c10d::Store>> OpenFileStore(const std::string& path,
                                                              const CommOptions& options,
                                                              const LaunchEnv& env) {
  const std::string label = internal::RankLabel(env.rank, env.world_size);
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        label, ": rendezvous file ", path, ": folder ", parent.string(), " does not exist"));
  }
  try {
    auto store = c10::make_intrusive<c10d::FileStore>(path, env.world_size);
    store->setTimeout(options.timeout);
    return c10::intrusive_ptr<c10d::Store>(store);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(label, ": cannot open rendezvous file ", path, ": ", ExceptionText(e)));
  }
}

absl::StatusOr<c10::intrusive_ptr<c10d::Store>> OpenGrpcStore(const std::string& address,
                                                              const CommOptions& options,
                                                              const LaunchEnv& env) {
  const std::string label = internal::RankLabel(env.rank, env.world_size);
  if (options.grpc_job_id.empty() || options.grpc_attempt < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": rendezvous grpc://", address,
        " needs the job attempt that scopes it (DEEPNET_JOB_ID and DEEPNET_ATTEMPT)"));
  }
  rpc::ChannelOptions channel_options;
  channel_options.address = address;
  channel_options.ca_cert_file = options.grpc_ca_cert_file;
  channel_options.tls_server_name = options.grpc_tls_server_name;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = rpc::MakeChannel(channel_options);
  if (!channel.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": rendezvous grpc://", address, ": ",
                                                   channel.status().message()));
  }
  GrpcStoreOptions store_options;
  store_options.address = address;
  store_options.job_id = options.grpc_job_id;
  store_options.attempt = options.grpc_attempt;
  store_options.timeout = options.timeout;
  store_options.bearer_token = options.grpc_token;
  absl::StatusOr<c10::intrusive_ptr<GrpcStore>> store =
      GrpcStore::Create(*std::move(channel), store_options);
  if (!store.ok()) {
    return absl::Status(store.status().code(),
                        absl::StrCat(label, ": ", store.status().message()));
  }
  return c10::intrusive_ptr<c10d::Store>(*std::move(store));
}

}  // namespace

absl::StatusOr<c10::intrusive_ptr<c10d::Store>> CreateRendezvousStore(const CommOptions& options,
                                                                      const LaunchEnv& env) {
  const std::string& spec = options.rendezvous;
  const std::string label = internal::RankLabel(env.rank, env.world_size);
  if (options.timeout.count() <= 0) {
    return absl::InvalidArgumentError(label + ": communicator timeout must be > 0");
  }
  if (absl::StartsWith(spec, kTcpScheme)) {
    const std::string endpoint = spec.substr(sizeof(kTcpScheme) - 1);
    const size_t colon = endpoint.rfind(':');
    int port = 0;
    std::string host = colon == std::string::npos ? "" : endpoint.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);  // [::1]:29500
    }
    if (host.empty() || !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous \"", spec, "\" is not tcp://HOST:PORT with 0 < PORT < 65536"));
    }
    return OpenTcpStore(host, port, options, env);
  }
  if (absl::StartsWith(spec, kFileScheme)) {
    const std::string path = spec.substr(sizeof(kFileScheme) - 1);
    if (path.empty() || path.front() != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous \"", spec, "\" is not file:///ABSOLUTE/PATH"));
    }
    return OpenFileStore(path, options, env);
  }
  if (absl::StartsWith(spec, kGrpcScheme)) {
    const std::string address = spec.substr(sizeof(kGrpcScheme) - 1);
    const size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous \"", spec, "\" is not grpc://HOST:PORT with 0 < PORT < 65536"));
    }
    return OpenGrpcStore(address, options, env);
  }
  if (!spec.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous \"", spec,
                                                   "\" is neither tcp://HOST:PORT, file:///PATH "
                                                   "nor grpc://HOST:PORT (nor empty)"));
  }
  if (!env.master_addr.empty()) return OpenTcpStore(env.master_addr, env.master_port, options, env);
  if (!env.job_id.empty()) {
    const std::string path = (std::filesystem::path(options.rendezvous_dir) /
                              ("deepnet-rendezvous-" + FileNameSafe(env.job_id)))
                                 .string();
    return OpenFileStore(path, options, env);
  }
  return absl::FailedPreconditionError(absl::StrCat(
      label, ": no rendezvous for ", env.world_size, " ranks (launcher \"", env.launcher,
      "\" gives no job id and MASTER_ADDR/MASTER_PORT are unset); set parallel.rendezvous to "
      "tcp://HOST:PORT or file:///PATH"));
}

std::string RendezvousHost(const CommOptions& options, const LaunchEnv& env) {
  for (const char* scheme : {kTcpScheme, kGrpcScheme}) {
    if (!absl::StartsWith(options.rendezvous, scheme)) continue;
    const std::string endpoint = options.rendezvous.substr(std::string(scheme).size());
    std::string host = endpoint.substr(0, endpoint.rfind(':'));
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    return host;
  }
  return env.master_addr;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateWorldCommunicator(const CommOptions& options,
                                                                      const LaunchEnv& env,
                                                                      MpiSession* mpi) {
  if (options.backend == CommBackendKind::kMpi) {
    if (mpi == nullptr) {
      return absl::FailedPreconditionError(
          "the mpi backend needs an MpiSession (create it first in main)");
    }
    if (env.launcher != "none" &&
        (env.rank != mpi->world_rank() || env.world_size != mpi->world_size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("launcher \"", env.launcher, "\" says rank ", env.rank, "/", env.world_size,
                       " but MPI_COMM_WORLD says ", mpi->world_rank(), "/", mpi->world_size()));
    }
    if (mpi->world_size() == 1) return std::unique_ptr<Communicator>(new LoopbackCommunicator());
    absl::StatusOr<std::unique_ptr<MpiCommunicator>> comm =
        MpiCommunicator::CreateWorld(*mpi, options.timeout);
    if (!comm.ok()) return comm.status();
    return StageWhereNeeded(*std::move(comm), options.cuda_device);
  }
  if (env.world_size == 1) return std::unique_ptr<Communicator>(new LoopbackCommunicator());

  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = CreateRendezvousStore(options, env);
  if (!store.ok()) return store.status();
  // Keys of the world group live under their own prefix, so that other groups can share the store.
  auto world_store = c10::make_intrusive<c10d::PrefixStore>(
      absl::StrCat("deepnet/", ToString(options.backend), "/world"), *store);
  if (options.backend == CommBackendKind::kGloo) {
#ifdef DEEPNET_HAVE_GLOO
    std::string hostname = options.gloo_hostname;
    if (hostname.empty()) {
      absl::StatusOr<GlooAddress> chosen = SelectGlooAddress(env, RendezvousHost(options, env));
      if (!chosen.ok()) return chosen.status();
      hostname = chosen->address;
    }
    absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
        GlooCommunicator::Create(world_store, env.rank, env.world_size, options.timeout, hostname);
    if (!comm.ok()) return comm.status();
    return StageWhereNeeded(*std::move(comm), options.cuda_device);
#else
    return absl::UnimplementedError(
        "the gloo backend is not compiled into this build (LibTorch without Gloo headers)");
#endif
  }
#ifdef DEEPNET_HAVE_NCCL
  // The trainer's device (options.cuda_device, picked once by SelectCudaDevice); callers that
  // pick none get the same choice here.
  absl::StatusOr<int> device =
      options.cuda_device >= 0
          ? absl::StatusOr<int>(options.cuda_device)
          : SelectCudaDevice(env, static_cast<int>(torch::cuda::device_count()));
  if (!device.ok()) return device.status();
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> comm =
      NcclCommunicator::Create(world_store, env.rank, env.world_size, *device, options.timeout);
  if (!comm.ok()) return comm.status();
  return StageWhereNeeded(*std::move(comm), *device);
#else
  return absl::UnimplementedError(
      "the nccl backend is not compiled into this build (it needs a CUDA LibTorch and NCCL)");
#endif
}

absl::StatusOr<World> OpenWorld(const CommOptions& options, const LaunchEnv& env) {
  World world;
  if (options.backend == CommBackendKind::kMpi) {
    if (absl::Status launch =
            CheckMpiLaunch(env, [](const char* name) { return std::getenv(name); });
        !launch.ok()) {
      return launch;
    }
    absl::StatusOr<std::unique_ptr<MpiSession>> session = MpiSession::Create();
    if (!session.ok()) return session.status();
    world.mpi = *std::move(session);
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      CreateWorldCommunicator(options, env, world.mpi.get());
  if (!comm.ok()) return comm.status();
  world.comm = *std::move(comm);
  return world;
}

}  // namespace deepnet::comm
