#pragma once
// How a rank's exit reads in job events and state reasons.

#include <string>

#include "coordinator/core/coordinator_types.h"

namespace deepnet::coordinator {

// "was killed by signal 9" / "exited with code 1".
std::string DescribeExit(const TrainerExitReport& exit);
// For a stopped rank: what it left behind, e.g. "stopped with its state in the checkpoint of
// step 40"; empty when the worker did not say (not a stop, or an older worker).
std::string DescribeStopCheckpoint(const TrainerExitReport& exit);

}  // namespace deepnet::coordinator
