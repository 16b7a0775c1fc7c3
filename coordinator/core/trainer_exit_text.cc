#include "coordinator/core/trainer_exit_text.h"

#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {

std::string DescribeExit(const TrainerExitReport& exit) {
  return exit.signal != 0 ? absl::StrCat("was killed by signal ", exit.signal)
                          : absl::StrCat("exited with code ", exit.exit_code);
}

std::string DescribeStopCheckpoint(const TrainerExitReport& exit) {
  const std::string last = exit.checkpoint_step > 0 ? absl::StrCat("the newest checkpoint is step ",
                                                                   exit.checkpoint_step)
                                                    : std::string("it has no checkpoint");
  switch (exit.checkpoint) {
    case StopCheckpoint::kUnspecified:
      return "";
    case StopCheckpoint::kSaved:
      return exit.checkpoint_step > 0
                 ? absl::StrCat("stopped with its state in the checkpoint of step ",
                                exit.checkpoint_step)
                 : std::string("stopped with its state in a checkpoint");
    case StopCheckpoint::kNotNeeded:
      return "stopped before training anything: no checkpoint written (none needed)";
    case StopCheckpoint::kNotSaved:
      return absl::StrCat(exit.signal != 0 ? "killed before it wrote a checkpoint"
                                           : "stopped without writing a checkpoint",
                          " (", DescribeExit(exit), "): steps since are lost; ", last);
  }
  return "";
}

}  // namespace deepnet::coordinator
