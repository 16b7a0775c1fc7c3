#include "experiment/sweep_runner.h"

#ifndef DEEPNET_GIT_COMMIT
#define DEEPNET_GIT_COMMIT "unknown"
#endif

namespace deepnet::experiment {

std::string BuildCommit() { return DEEPNET_GIT_COMMIT; }

}  // namespace deepnet::experiment
