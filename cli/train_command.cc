#include "cli/commands.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/parent_watch.h"
#include "cli/train_stop.h"
#include "comm/communicator_factory.h"
#include "comm/gloo_address.h"
#include "comm/launch_env.h"
#include "job/job_config.h"
#include "job/stop_exit.h"
#include "storage/checkpoint_fence.h"
#include "train/cuda_device.h"
#include "train/engine_options.h"
#include "train/runtime_threads.h"
#include "train/trainer.h"

namespace deepnet::cli {

// The coordinator reads this exit code as "fenced out" (coordinator_workers.cc).
static_assert(kExitFencedOut == storage::kFencedOutExitCode);
static_assert(kExitGuardExhausted == job::kGuardExhaustedExitCode);
static_assert(kExitTerminated == job::kStoppedCheckpointedExitCode);
static_assert(kExitStoppedNothingTrained == job::kStoppedNothingTrainedExitCode);
static_assert(kExitStoppedUnsaved == job::kStoppedUnsavedExitCode);

namespace {

// Writes "WHO TEXT\n" with one write: ranks launched together share one terminal or log file,
// and a line written piece by piece can get another rank's output in its middle.
void Say(std::ostream& err, const std::string& who, const std::string& text) {
  err << absl::StrCat(who, text, "\n") << std::flush;
}

}  // namespace

int RunTrain(const TrainCommand& command, const std::atomic<bool>* stop, std::ostream& out,
             std::ostream& err) {
  auto config = job::LoadJobConfig(command.config_path, command.overrides);
  if (!config.ok()) {
    Say(err, "deepnet train: ", std::string(config.status().message()));
    return kExitBadInput;
  }
  if (command.validate_only) {
    out << job::DumpJobConfig(*config);
    return kExitOk;
  }
  // A stop during the start-up ends at once, saying that nothing was trained (train_stop.h).
  StartupStopWatch startup(stop, "deepnet train: ");
  startup.SetPhase("detecting the launcher");
  auto launch = comm::DetectLaunchEnv();
  if (!launch.ok()) {
    Say(err, "deepnet train: ", std::string(launch.status().message()));
    return kExitBadInput;
  }
  // Started by deepnet-worker: end with it (see parent_watch.h).
  if (const char* daemon = std::getenv("DEEPNET_WORKER_PID"); daemon != nullptr && *daemon) {
    int pid = 0;
    if (!absl::SimpleAtoi(daemon, &pid) || pid <= 1) {
      Say(err,
          "deepnet train: ", absl::StrCat("DEEPNET_WORKER_PID=", daemon, " is not a process id"));
      return kExitBadInput;
    }
    ExitWhenParentDies(pid, std::chrono::seconds(1));
  }
  const int64_t world_size = config->parallel.world_size();
  if (launch->world_size != world_size) {
    Say(err, "deepnet train: ",
        absl::StrCat("parallel: the launcher (", launch->launcher, ") started ", launch->world_size,
                     " rank(s) but parallel.pipeline_stages x parallel.data_parallel = ",
                     config->parallel.pipeline_stages, " x ", config->parallel.data_parallel, " = ",
                     world_size));
    return kExitBadInput;
  }
  // One GPU per rank, picked once, current before anything else touches CUDA, and used for
  // tensors and communicator alike: `cuda` means DEEPNET_CUDA_DEVICE (deepnet-worker narrows
  // CUDA_VISIBLE_DEVICES to its slot's GPU and names 0), else local rank mod visible GPUs.
  auto device = train::PinRankDevice(config->runtime.device, *launch);
  if (!device.ok()) {
    Say(err, "deepnet train: ", std::string(device.status().message()));
    return kExitBadInput;
  }
  config->runtime.device = device->device;
  const std::string who = world_size > 1 ? "deepnet train: rank " + std::to_string(launch->rank) + ": "
                                         : "deepnet train: ";
  startup.SetWho(who);
  // Ranks sharing a machine share its cores: OpenBLAS gets cores / local ranks by default.
  int64_t blas_threads = config->runtime.blas_threads;
  if (blas_threads == 0 && launch->local_size > 1) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    blas_threads = std::max<int64_t>(1, cores / launch->local_size);
  }
  const train::ThreadSettings threads =
      train::ConfigureThreads(blas_threads, config->runtime.intra_op_threads);
  train::KeepFreedMemoryForReuse();
  comm::World world;  // Outlives the trainer.
  if (world_size > 1) {
    comm::CommOptions options;
    options.backend = train::CommBackendOf(config->parallel.backend);
    options.timeout = std::chrono::milliseconds(
        static_cast<int64_t>(config->parallel.timeout_s * 1000.0));
    // deepnet-worker's rendezvous (the coordinator's) wins over the job file's.
    options.rendezvous =
        launch->rendezvous.empty() ? config->parallel.rendezvous : launch->rendezvous;
    options.grpc_job_id = launch->control_job_id;
    options.grpc_attempt = launch->attempt;
    options.grpc_token = launch->token;
    options.grpc_ca_cert_file = launch->ca_cert_file;
    options.grpc_tls_server_name = launch->tls_server_name;
    options.cuda_device = device->cuda_index;
    // Gloo's address (comm/gloo_address.h), said on stderr (stdout may be JSON lines).
    if (options.backend == comm::CommBackendKind::kGloo) {
      auto address = comm::SelectGlooAddress(*launch, comm::RendezvousHost(options, *launch));
      if (!address.ok()) {
        Say(err, who, std::string(address.status().message()));
        return absl::IsInvalidArgument(address.status()) ? kExitBadInput : kExitFailure;
      }
      options.gloo_hostname = address->address;
      Say(err, who, absl::StrCat("gloo binds ", address->address, " (", address->source, ")"));
    }
    startup.SetPhase(
        absl::StrCat("waiting at the rendezvous for the other ", world_size - 1, " rank(s)"));
    auto opened = comm::OpenWorld(options, *launch);
    if (!opened.ok()) {
      Say(err, who, std::string(opened.status().message()));
      return absl::IsInvalidArgument(opened.status()) ? kExitBadInput : kExitFailure;
    }
    world = *std::move(opened);
  }
  train::TrainerIo io;
  io.out = &out;
  io.format = command.log_format == "json" ? train::LogFormat::kJson : train::LogFormat::kText;
  // mpirun gives ranks a pseudo-terminal; a redrawn line belongs to interactive single runs.
  io.live = &out == &std::cout && isatty(STDOUT_FILENO) && world_size == 1;
  io.stop = stop;
  if (!command.no_memory_check) {
    io.memory = train::AvailableMemory(config->runtime.device.is_cuda(),
                                       launch->local_size, train::DefaultMemorySources());
  }
  // Test facility: forced NaN losses or spikes for the divergence guard (docs/OPERATIONS.md).
  if (const char* fault = std::getenv("DEEPNET_GUARD_FAULT"); fault != nullptr && *fault) {
    auto hook = train::ParseGuardFault(fault, launch->rank);
    if (!hook.ok()) {
      Say(err, "deepnet train: ", std::string(hook.status().message()));
      return kExitBadInput;
    }
    io.step_fault = *std::move(hook);
  }
  io.checkpoint_fence.job_id = launch->control_job_id;
  io.checkpoint_fence.job_uid = launch->control_job_uid;
  io.checkpoint_fence.attempt = launch->attempt;
  if (io.format == train::LogFormat::kText && launch->rank == 0) {
    const char* core = std::getenv("OPENBLAS_CORETYPE");
    out << "[threads] " << threads.blas_library << (core ? std::string(" (") + core + ")" : "")
        << " threads " << threads.blas_threads
        << ", LibTorch intra-op threads " << threads.intra_op_threads << "\n";
  }
  // From here a stop is taken before the first step (Trainer::Run), after the model, the data
  // and any resumed checkpoint are loaded, so that its message can say what the state is.
  startup.Disarm();
  auto trainer = train::Trainer::Create(*config, io, world.comm.get());
  if (!trainer.ok() && storage::IsFencedOut(trainer.status())) {
    Say(err, who, absl::StrCat("fenced out: ", trainer.status().message()));
    if (world.comm) world.comm->Abort(std::string(trainer.status().message()));
    return kExitFencedOut;
  }
  if (!trainer.ok()) {
    Say(err, who, std::string(trainer.status().message()));
    // Peers blocked on this rank fail now rather than at their timeout.
    if (world.comm) world.comm->Abort(std::string(trainer.status().message()));
    return absl::IsInvalidArgument(trainer.status()) || absl::IsFailedPrecondition(trainer.status())
               ? kExitBadInput
               : kExitFailure;
  }
  auto summary = (*trainer)->Run();
  if (!summary.ok() && storage::IsFencedOut(summary.status())) {
    // Nothing of this attempt was committed; the folder belongs to the job's newer attempt.
    Say(err, who, absl::StrCat("fenced out: ", summary.status().message()));
    if (world.comm) world.comm->Abort(std::string(summary.status().message()));
    return kExitFencedOut;
  }
  if (!summary.ok()) {
    Say(err, who, std::string(summary.status().message()));
    // Every rank took the guard's decision: no peer waits on this one.
    if (train::IsGuardFailure(summary.status())) return kExitGuardExhausted;
    if (world.comm) world.comm->Abort(std::string(summary.status().message()));
    return kExitFailure;
  }
  if (summary->stop_reason == "signal") {
    const StopEnding ending =
        DescribeSignalStop(summary->start_step, summary->final_step, summary->last_checkpoint,
                           !config->checkpoint.dir.empty());
    Say(err, who, ending.message);
    return ending.exit_code;
  }
  return kExitOk;
}

}  // namespace deepnet::cli
