#pragma once

#include <cstdlib>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace deepnet::comm {

/// Where this process sits in a multi-process launch, read from the launcher's environment.
struct LaunchEnv {
  int rank = 0;        // Global rank, 0 <= rank < world_size.
  int world_size = 1;  // Number of processes in the job.
  int local_rank = 0;  // Rank among the processes on this node (selects the GPU).
  int local_size = 1;  // Processes on this node; world_size when the launcher does not say.
  // Who set the variables: "deepnet", "mpirun", "pmix", "slurm", "torchrun" or "none".
  std::string launcher = "none";
  // MASTER_ADDR / MASTER_PORT when both are set (a TCPStore rendezvous); else "" and 0.
  std::string master_addr;
  int master_port = 0;
  // The launcher's job id (Open MPI's OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE, Slurm's
  // "SLURM_JOB_ID.SLURM_STEP_ID"); "" when there is none. Names a FileStore rendezvous.
  std::string job_id;

  // Set by deepnet-worker (the coordinator's gang), empty/-1 otherwise:
  // DEEPNET_RENDEZVOUS ("grpc://HOST:PORT", the coordinator's Rendezvous service; it wins over
  // parallel.rendezvous), scoped by DEEPNET_JOB_ID and DEEPNET_ATTEMPT.
  std::string rendezvous;
  std::string control_job_id;
  // DEEPNET_JOB_UID: the job id with its creation time (recorded in checkpoint FENCEs).
  std::string control_job_uid;
  int attempt = 0;
  // DEEPNET_TOKEN (bearer token), DEEPNET_CA_CERT (PEM CA: TLS), DEEPNET_TLS_SERVER_NAME.
  std::string token;
  std::string ca_cert_file;
  std::string tls_server_name;
  // DEEPNET_CUDA_DEVICE: this rank's CUDA ordinal among the devices it sees (`cuda` means
  // cuda:N; deepnet-worker narrows CUDA_VISIBLE_DEVICES to the slot's GPU and sets 0); -1: none.
  int cuda_device = -1;
  // DEEPNET_ADVERTISE_ADDRESS: this host's address for Gloo sockets; "" when unset.
  std::string advertise_address;
};

/// Reads the launch environment, first match wins: DEEPNET_RANK/DEEPNET_WORLD_SIZE
/// [/DEEPNET_LOCAL_RANK/DEEPNET_LOCAL_SIZE] (our coordinator), OMPI_COMM_WORLD_RANK/SIZE/
/// LOCAL_RANK/LOCAL_SIZE (mpirun), PMIX_RANK with the size from OMPI_COMM_WORLD_SIZE, PMIX_SIZE
/// or (srun --mpi=pmix) SLURM_NTASKS, SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun; the local
/// size of srun and PMIx ranks from SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID),
/// RANK/WORLD_SIZE/LOCAL_RANK[/LOCAL_WORLD_SIZE] (torchrun). Without any: rank 0 of 1.
/// InvalidArgument naming the variable for garbage, a missing size, or rank >= size. Also reads
/// the deepnet-worker variables (see LaunchEnv::rendezvous); DEEPNET_JOB_ID names the job.
/// `getenv` is injectable for tests; it is called from this thread only.
[[nodiscard]] absl::StatusOr<LaunchEnv> DetectLaunchEnv(
    const std::function<const char*(const char*)>& getenv = ::getenv);

/// The CUDA ordinal this rank uses for its tensors and its communicator alike, picked once:
/// env.cuda_device (DEEPNET_CUDA_DEVICE) when set, else the local rank modulo
/// `visible_devices` (ranks of a node spread over its GPUs; more ranks than GPUs share them).
/// InvalidArgument when no device is visible or DEEPNET_CUDA_DEVICE is not among them.
[[nodiscard]] absl::StatusOr<int> SelectCudaDevice(const LaunchEnv& env, int visible_devices);

}  // namespace deepnet::comm
