#include "worker/commands.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "worker/inspect.h"
#include "worker/job_config.h"
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
  const ThreadSettings threads =
      ConfigureThreads(config->runtime.blas_threads, config->runtime.intra_op_threads);
  TrainerIo io;
  io.out = &out;
  io.format = command.log_format == "json" ? LogFormat::kJson : LogFormat::kText;
  io.live = &out == &std::cout && isatty(STDOUT_FILENO);
  io.stop = stop;
  if (io.format == LogFormat::kText) {
    const char* core = std::getenv("OPENBLAS_CORETYPE");
    out << "[threads] " << threads.blas_library << (core ? std::string(" (") + core + ")" : "")
        << " threads " << threads.blas_threads
        << ", LibTorch intra-op threads " << threads.intra_op_threads << "\n";
  }
  auto trainer = Trainer::Create(*config, io);
  if (!trainer.ok()) {
    err << "deepnet train: " << trainer.status().message() << "\n";
    return absl::IsInvalidArgument(trainer.status()) || absl::IsFailedPrecondition(trainer.status())
               ? kExitBadInput
               : kExitFailure;
  }
  auto summary = (*trainer)->Run();
  if (!summary.ok()) {
    err << "deepnet train: " << summary.status().message() << "\n";
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
