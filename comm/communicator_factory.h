#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/launch_env.h"
#include "comm/mpi_session.h"

namespace deepnet::comm {

struct CommOptions {
  CommBackendKind backend = CommBackendKind::kGloo;
  // Bound on every operation, including connecting the group; must be > 0.
  std::chrono::milliseconds timeout{300000};
  // How gloo and nccl ranks find each other: "tcp://HOST:PORT" (rank 0 serves a TCPStore on
  // PORT, the others connect to HOST:PORT), "file:///PATH" (a FileStore on a file system every
  // rank sees; the file must not be left over from another job), "grpc://HOST:PORT" (the
  // coordinator's Rendezvous service, scoped by grpc_job_id/grpc_attempt), or "" for: MASTER_ADDR/
  // MASTER_PORT when set, else a FileStore named after the launcher's job id in
  // `rendezvous_dir`, else an error. Not used by mpi.
  std::string rendezvous;
  // Folder of the job-id FileStore (shared by all nodes of a multi-node job).
  std::string rendezvous_dir = "/tmp";
  // Address Gloo's sockets bind to and peers connect to; "" = SelectGlooAddress's choice
  // (comm/gloo_address.h: DEEPNET_ADVERTISE_ADDRESS, GLOO_SOCKET_IFNAME, 127.0.0.1 when every
  // rank runs on this node, else a non-loopback address of this host).
  std::string gloo_hostname;
  // grpc:// only: the job attempt that scopes the keys (set by deepnet-worker), the bearer
  // token ("" sends none), the PEM CA file (non-empty: TLS) and the TLS name override.
  std::string grpc_job_id;
  int grpc_attempt = 0;
  std::string grpc_token;
  std::string grpc_ca_cert_file;
  std::string grpc_tls_server_name;
  // The trainer's CUDA ordinal (-1: it trains on CPU). nccl runs on it (-1: SelectCudaDevice's
  // choice). The world then takes host tensors and tensors on this device whatever its
  // transport moves (StageWhereNeeded: gloo and mpi get device tensors staged through host
  // memory, so that ranks can share one GPU; nccl gets host tensors staged on its device).
  int cuda_device = -1;
};

/// Opens the rendezvous store that `options.rendezvous` (or the environment, see CommOptions)
/// names, for rank env.rank of env.world_size; its timeout is options.timeout. A tcp:// store
/// blocks until every rank has connected to rank 0's server. InvalidArgument for a malformed
/// rendezvous, FailedPrecondition when none can be derived, Unavailable when it cannot be
/// opened in time. The caller owns (shares) the store.
[[nodiscard]] absl::StatusOr<c10::intrusive_ptr<c10d::Store>> CreateRendezvousStore(
    const CommOptions& options, const LaunchEnv& env);

/// The host the ranks rendezvous at: the HOST of a tcp:// or grpc:// options.rendezvous, else
/// env.master_addr ("" when neither names one). Gloo's address is the one that routes there.
std::string RendezvousHost(const CommOptions& options, const LaunchEnv& env);

/// Creates the communicator of all ranks of the job for options.backend. kMpi needs `mpi` (it
/// takes rank and size from MPI_COMM_WORLD and checks them against `env` when a launcher set
/// them); kGloo and kNccl bootstrap through CreateRendezvousStore and ignore `mpi`. A world of
/// one rank gets a LoopbackCommunicator whatever the backend (no store, no MPI traffic). The
/// communicator is staged where its capabilities need it (StageWhereNeeded). kNccl is
/// Unimplemented in builds without CUDA and NCCL. Blocks until the group is connected or
/// options.timeout passes.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> CreateWorldCommunicator(
    const CommOptions& options, const LaunchEnv& env, MpiSession* mpi);

/// The communication of one process: the MPI session (only for the mpi backend; declared first
/// so that it is finalised after the communicator) and the world communicator.
struct World {
  std::unique_ptr<MpiSession> mpi;
  std::unique_ptr<Communicator> comm;
};

/// Starts MPI when options.backend is kMpi, then CreateWorldCommunicator. The errors of both.
[[nodiscard]] absl::StatusOr<World> OpenWorld(const CommOptions& options, const LaunchEnv& env);

}  // namespace deepnet::comm
