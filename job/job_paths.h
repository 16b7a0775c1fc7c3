#pragma once
// The file system paths of a job spec and how the trainer uses each: the one list the
// coordinator and the worker daemon check against the storage policy (storage/storage_policy.h).
// It is read off the schema (job/job_schema.h: every key declared with Path), so a new path key
// is checked as soon as it is declared; tests/job/job_schema_test.cc fails when a key named like
// a path (*_path, *_dir, *_file, dir) is declared as a plain string.

#include <string>
#include <vector>

#include "job/job_config.h"
#include "job/job_schema.h"

namespace deepnet::job {

struct JobPath {
  std::string field;  // The dotted key, e.g. "checkpoint.dir".
  std::string value;
  JobPathUse use = JobPathUse::kReadFile;
};

/// Every non-empty path field of `config`, in schema order, whether or not data.source uses it.
std::vector<JobPath> JobPaths(const JobConfig& config);

}  // namespace deepnet::job
