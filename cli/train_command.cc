#include "worker/commands.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/numbers.h"
#include "worker/communicator_factory.h"
#include "worker/inspect.h"
#include "worker/launch_env.h"
#include "worker/job_config.h"
#include "worker/parent_watch.h"
#include "worker/runtime_threads.h"
#include "worker/trainer.h"
#include "worker/translator.h"

namespace deepnet::worker {

int RunTrain(const TrainCommand& command, const std::atomic<bool>* stop, std::ostream& out,
             std::ostream& err) {
  auto config = LoadJobConfig(command.config_path, command.overrides);
  if (!config.ok()) {
    err << "deepnet train: " << config.status().message() << "\n";
    return kExitBadInput;
  }
  if (command.validate_only) {
    out << DumpJobConfig(*config);
    return kExitOk;
  }
  auto launch = DetectLaunchEnv();
  if (!launch.ok()) {
    err << "deepnet train: " << launch.status().message() << "\n";
    return kExitBadInput;
  }
  // Started by deepnet-worker: end with it (see parent_watch.h).
  if (const char* daemon = std::getenv("DEEPNET_WORKER_PID"); daemon != nullptr && *daemon) {
    int pid = 0;
    if (!absl::SimpleAtoi(daemon, &pid) || pid <= 1) {
      err << "deepnet train: DEEPNET_WORKER_PID=" << daemon << " is not a process id\n";
      return kExitBadInput;
    }
    ExitWhenParentDies(pid, std::chrono::seconds(1));
  }
  const int64_t world_size = config->parallel.world_size();
  if (launch->world_size != world_size) {
    err << "deepnet train: parallel: the launcher (" << launch->launcher << ") started "
        << launch->world_size << " rank(s) but parallel.pipeline_stages x parallel.data_parallel = "
        << config->parallel.pipeline_stages << " x " << config->parallel.data_parallel << " = "
        << world_size << "\n";
    return kExitBadInput;
  }
  // One GPU per local rank: `cuda` means this rank's device (deepnet-worker names its slot's).
  if (config->runtime.device == "cuda" && launch->cuda_device >= 0) {
    config->runtime.device = "cuda:" + std::to_string(launch->cuda_device);
  } else if (config->runtime.device == "cuda" && launch->local_size > 1) {
    config->runtime.device = "cuda:" + std::to_string(launch->local_rank);
  }
  const std::string who = world_size > 1 ? "deepnet train: rank " + std::to_string(launch->rank) + ": "
                                         : "deepnet train: ";
  // Ranks sharing a machine share its cores: OpenBLAS gets cores / local ranks by default.
  int64_t blas_threads = config->runtime.blas_threads;
  if (blas_threads == 0 && launch->local_size > 1) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    blas_threads = std::max<int64_t>(1, cores / launch->local_size);
  }
  const ThreadSettings threads = ConfigureThreads(blas_threads, config->runtime.intra_op_threads);
  KeepFreedMemoryForReuse();
  World world;  // Outlives the trainer.
  if (world_size > 1) {
    auto backend = ParseCommBackend(config->parallel.backend);
    if (!backend.ok()) {
      err << who << "parallel.backend: " << backend.status().message() << "\n";
      return kExitBadInput;
    }
    CommOptions options;
    options.backend = *backend;
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
    options.cuda_device = launch->cuda_device;
    // Ranks on several machines: Gloo binds to the address deepnet-worker advertises.
    if (launch->local_size < launch->world_size) {
      options.gloo_hostname = launch->advertise_address;
    }
    auto opened = OpenWorld(options, *launch);
    if (!opened.ok()) {
      err << who << opened.status().message() << "\n";
      return absl::IsInvalidArgument(opened.status()) ? kExitBadInput : kExitFailure;
    }
    world = *std::move(opened);
  }
  TrainerIo io;
  io.out = &out;
  io.format = command.log_format == "json" ? LogFormat::kJson : LogFormat::kText;
  // mpirun gives ranks a pseudo-terminal; a redrawn line belongs to interactive single runs.
  io.live = &out == &std::cout && isatty(STDOUT_FILENO) && world_size == 1;
  io.stop = stop;
  if (io.format == LogFormat::kText && launch->rank == 0) {
    const char* core = std::getenv("OPENBLAS_CORETYPE");
    out << "[threads] " << threads.blas_library << (core ? std::string(" (") + core + ")" : "")
        << " threads " << threads.blas_threads
        << ", LibTorch intra-op threads " << threads.intra_op_threads << "\n";
  }
  auto trainer = Trainer::Create(*config, io, world.comm.get());
  if (!trainer.ok()) {
    err << who << trainer.status().message() << "\n";
    // Peers blocked on this rank fail now rather than at their timeout.
    if (world.comm) world.comm->Abort(std::string(trainer.status().message()));
    return absl::IsInvalidArgument(trainer.status()) || absl::IsFailedPrecondition(trainer.status())
               ? kExitBadInput
               : kExitFailure;
  }
  auto summary = (*trainer)->Run();
  if (!summary.ok()) {
    err << who << summary.status().message() << "\n";
    if (world.comm) world.comm->Abort(std::string(summary.status().message()));
    return kExitFailure;
  }
  return summary->stop_reason == "signal" ? kExitTerminated : kExitOk;
}

int RunInspect(const InspectCommand& command, std::ostream& out, std::ostream& err) {
  model::DeepNetConfig config = command.model;
  if (!command.config_path.empty()) {
    auto job = LoadJobConfig(command.config_path);
    if (!job.ok()) {
      err << "deepnet inspect: " << job.status().message() << "\n";
      return kExitBadInput;
    }
    config = job->model;
    if (config.vocab_size() == 0) config.vocab_size(command.model.vocab_size());
  }
  try {
    model::Validate(config);
  } catch (const c10::Error& e) {
    err << "deepnet inspect: " << e.what_without_backtrace() << "\n";
    return kExitBadInput;
  }
  out << (command.format == "json" ? InspectJson(config, command.stats) + "\n"
                                   : InspectText(config, command.stats));
  return kExitOk;
}

int RunTranslate(const TranslateCommand& command, std::istream& in, std::ostream& out,
                 std::ostream& err) {
  auto translator = Translator::Open(command.checkpoint, command.device);
  if (!translator.ok()) {
    err << "deepnet translate: " << translator.status().message() << "\n";
    return kExitBadInput;
  }
  model::SearchOptions options;
  options.beam_size = command.beam_size;
  options.length_penalty = command.length_penalty;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto result = (*translator)->Translate({line}, command.to_lang, options);
    if (!result.ok()) {
      err << "deepnet translate: " << result.status().message() << "\n";
      return absl::IsInvalidArgument(result.status()) ? kExitBadInput : kExitFailure;
    }
    out << result->front() << "\n" << std::flush;
  }
  return kExitOk;
}

}  // namespace deepnet::worker
