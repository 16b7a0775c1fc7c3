#include "coordinator/core/job_spec.h"

#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "job/job_config.h"
#include "job/job_paths.h"
#include "storage/storage_policy.h"
#include "job/memory_estimate.h"
#include "job/yaml_reader.h"

namespace deepnet::coordinator {
namespace {

namespace fs = std::filesystem;

using job::ConfigProblems;
using job::JobConfig;

enum class PathKind { kFile, kDirectory };

// Adds a problem at `field` unless `value` is an absolute path to an existing `kind`.
void CheckExistingPath(const std::string& field, const std::string& value, PathKind kind,
                       ConfigProblems* problems) {
  const fs::path path(value);
  if (!path.is_absolute()) {
    problems->Add(field, absl::StrCat("must be an absolute path on the shared storage (got '",
                                      value, "')"));
    return;
  }
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    problems->Add(field, absl::StrCat("does not exist (got '", value, "')"));
  } else if (ec) {
    problems->Add(field, absl::StrCat("cannot be checked: ", ec.message(), " (got '", value, "')"));
  } else if (kind == PathKind::kDirectory && !fs::is_directory(status)) {
    problems->Add(field, absl::StrCat("is not a directory (got '", value, "')"));
  } else if (kind == PathKind::kFile && fs::is_directory(status)) {
    problems->Add(field, absl::StrCat("is a directory, expected a file (got '", value, "')"));
  }
}

// checkpoint.dir may not exist yet (the trainer creates it), but its parent must.
void CheckCheckpointDir(const std::string& value, ConfigProblems* problems) {
  const std::string field = "checkpoint.dir";
  fs::path path = fs::path(value).lexically_normal();
  if (!path.is_absolute()) {
    problems->Add(field, absl::StrCat("must be an absolute path on the shared storage (got '",
                                      value, "')"));
    return;
  }
  // "/runs/a/" normalises to "/runs/a/", whose parent_path() would be "/runs/a" itself.
  if (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  std::error_code ec;
  const fs::file_status self = fs::status(path, ec);
  if (fs::exists(self) && !fs::is_directory(self)) {
    problems->Add(field, absl::StrCat("exists and is not a directory (got '", value, "')"));
    return;
  }
  const fs::path parent = path.parent_path();
  const fs::file_status status = fs::status(parent, ec);
  if (status.type() == fs::file_type::not_found) {
    problems->Add(field, absl::StrCat("parent directory ", parent.string(),
                                      " does not exist (got '", value, "')"));
  } else if (ec) {
    problems->Add(field, absl::StrCat("parent directory ", parent.string(),
                                      " cannot be checked: ", ec.message(), " (got '", value,
                                      "')"));
  } else if (!fs::is_directory(status)) {
    problems->Add(field, absl::StrCat("parent ", parent.string(), " is not a directory (got '",
                                      value, "')"));
  }
}

storage::PathAccess AccessOf(job::JobPathUse use) {
  switch (use) {
    case job::JobPathUse::kReadFile:
      return storage::PathAccess::kReadFile;
    case job::JobPathUse::kReadDir:
      return storage::PathAccess::kReadDir;
    case job::JobPathUse::kWriteDir:
      break;
  }
  return storage::PathAccess::kWriteDir;
}

// Every path field against the storage policy, for the submitting user.
void CheckStoragePolicy(const JobConfig& c, const JobSpecCheckOptions& options,
                        ConfigProblems* problems) {
  const storage::StorageUser user{options.user, options.teams};
  for (const job::JobPath& path : job::JobPaths(c)) {
    if (problems->Bad(path.field)) continue;
    const std::string refusal =
        options.storage_policy->Refusal(user, path.value, AccessOf(path.use));
    if (!refusal.empty()) problems->Add(path.field, refusal);
  }
}

// The rules of running a job under the coordinator, on top of the trainer's schema. A field
// the schema already reported is not reported again.
void CheckServiceRules(const JobConfig& c, const JobSpecCheckOptions& options,
                       ConfigProblems* problems) {
  if (!c.parallel.rendezvous.empty() && !problems->Bad("parallel.rendezvous")) {
    problems->Add("parallel.rendezvous",
                  absl::StrCat("must be unset: the coordinator provides the rendezvous (got '",
                               c.parallel.rendezvous, "')"));
  }
  if (c.runtime.device != "cpu" && c.runtime.device != "cuda" &&
      !problems->Bad("runtime.device")) {
    problems->Add("runtime.device",
                  absl::StrCat("must be cpu or cuda: the worker picks the GPU (got '",
                               c.runtime.device, "')"));
  }
  if (!options.check_paths) return;
  if (options.storage_policy != nullptr) {
    CheckStoragePolicy(c, options, problems);
    return;
  }
  if (c.data.source == "tsv") {
    if (!c.data.train_path.empty()) {
      CheckExistingPath("data.train_path", c.data.train_path, PathKind::kFile, problems);
    }
    if (!c.data.valid_path.empty()) {
      CheckExistingPath("data.valid_path", c.data.valid_path, PathKind::kFile, problems);
    }
  } else if (c.data.source == "shards" && !c.data.shard_dir.empty()) {
    CheckExistingPath("data.shard_dir", c.data.shard_dir, PathKind::kDirectory, problems);
  }
  if (!c.checkpoint.dir.empty()) CheckCheckpointDir(c.checkpoint.dir, problems);
}

}  // namespace

absl::StatusOr<JobSpecInfo> ParseJobSpec(const std::string& yaml_text,
                                         const JobSpecCheckOptions& options) {
  absl::StatusOr<JobConfig> config = job::ParseJobConfig(
      yaml_text, {}, "job spec", [&options](const JobConfig& c, ConfigProblems* problems) {
        CheckServiceRules(c, options, problems);
      });
  if (!config.ok()) return config.status();
  const JobConfig& c = *config;
  // The schema bounds these to 32 bits (parallel: ranks; scheduling: priority, max_restarts).
  JobSpecInfo info;
  info.name = c.name;
  info.pipeline_stages = static_cast<int32_t>(c.parallel.pipeline_stages);
  info.data_parallel = static_cast<int32_t>(c.parallel.data_parallel);
  info.cuda = c.runtime.device == "cuda";
  info.priority = static_cast<int32_t>(c.scheduling.priority);
  info.max_restarts = static_cast<int32_t>(c.scheduling.max_restarts);
  info.hang_timeout_s = c.scheduling.hang_timeout_s;
  info.start_timeout_s = c.scheduling.start_timeout_s;
  info.max_steps = c.train.max_steps;
  info.checkpoint_dir = c.checkpoint.dir;
  info.checkpoint_every_steps = c.checkpoint.every_steps;
  info.labels = c.scheduling.labels;
  info.team = c.scheduling.team;
  const job::MemoryEstimate memory = job::EstimateJobMemory(c, job::kAssumedVocabulary);
  info.memory_per_rank_bytes = memory.largest.total_bytes;
  info.memory_biggest_part = memory.biggest_part();
  info.memory_summary = memory.Summary();
  return info;
}

}  // namespace deepnet::coordinator
