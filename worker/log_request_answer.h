#pragma once
// The worker's answer to the coordinator's LogRequest (worker_service.proto): the proto side of
// ReadTrainerLog. Torch-free; thread-safe.

#include <string>

#include "deepnet/v1/worker_service.pb.h"

namespace deepnet::worker {

// Reads the requested part of the log under `work_dir`; a refusal goes into error_code/error.
// `running`: whether the rank's trainer runs on this worker, checked just before the call.
v1::LogChunk AnswerLogRequest(const v1::LogRequest& request, const std::string& work_dir,
                              bool running);

}  // namespace deepnet::worker
