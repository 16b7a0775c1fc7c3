#pragma once
// The file system paths of a job spec and how the trainer uses each: the one list the
// coordinator and the worker daemon check against the storage policy (storage/storage_policy.h).

#include <string>
#include <vector>

#include "job/job_config.h"

namespace deepnet::job {

enum class JobPathUse {
  kReadFile,  // data.train_path, data.valid_path
  kReadDir,   // data.shard_dir
  kWriteDir,  // checkpoint.dir (created by the trainer when missing)
};

struct JobPath {
  std::string field;  // e.g. "checkpoint.dir"
  std::string value;
  JobPathUse use = JobPathUse::kReadFile;
};

/// Every non-empty path field of `config`, whether or not data.source uses it.
std::vector<JobPath> JobPaths(const JobConfig& config);

}  // namespace deepnet::job
