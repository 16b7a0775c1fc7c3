#include "job/job_paths.h"

namespace deepnet::job {

std::vector<JobPath> JobPaths(const JobConfig& config) {
  std::vector<JobPath> out;
  auto add = [&out](const char* field, const std::string& value, JobPathUse use) {
    if (!value.empty()) out.push_back({field, value, use});
  };
  add("data.train_path", config.data.train_path, JobPathUse::kReadFile);
  add("data.valid_path", config.data.valid_path, JobPathUse::kReadFile);
  add("data.shard_dir", config.data.shard_dir, JobPathUse::kReadDir);
  add("checkpoint.dir", config.checkpoint.dir, JobPathUse::kWriteDir);
  return out;
}

}  // namespace deepnet::job
