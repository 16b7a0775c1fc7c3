#pragma once

// The coordinator's reading of a submitted job's YAML: the trainer's own schema and rules
// (job/job_config.h, target deepnet_job, no LibTorch) plus the rules of running the
// job as a service. Pure functions; safe to call from any thread.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::storage {
class StoragePolicy;
}  // namespace deepnet::storage

namespace deepnet::coordinator {

// What the coordinator needs to know about a submitted job; parsed from its YAML.
struct JobSpecInfo {
  std::string name;
  int32_t pipeline_stages = 1;
  int32_t data_parallel = 1;
  bool cuda = false;               // runtime.device is cuda
  int32_t priority = 0;
  int32_t max_restarts = 2;
  double hang_timeout_s = 0;       // 0: off
  double start_timeout_s = 300;
  int64_t max_steps = 0;           // train.max_steps
  std::string checkpoint_dir;      // checkpoint.dir; empty: no checkpoints
  int64_t checkpoint_every_steps = 0;
  std::map<std::string, std::string> labels;
  std::string team;                // scheduling.team; empty: charged to the owner only
  // Estimated memory of the rank that needs the most (job/memory_estimate.h; a vocab_size of 0
  // is estimated with job::kAssumedVocabulary), saturated at INT64_MAX; its largest part
  // ("activations", ...) and a one-line breakdown for messages.
  int64_t memory_per_rank_bytes = 0;
  std::string memory_biggest_part;
  std::string memory_summary;
};

struct JobSpecCheckOptions {
  // Check paths as the coordinator sees them (shared storage): absolute, data paths exist,
  // checkpoint.dir's parent exists.
  bool check_paths = true;
  // With check_paths and a storage policy (--storage-root), every non-empty path field
  // (job/job_paths.h) must pass the policy for `user` and `teams` instead of the checks above.
  std::shared_ptr<const storage::StoragePolicy> storage_policy;
  std::string user;
  std::vector<std::string> teams;
};

// INVALID_ARGUMENT "job spec: <field.path>: <message>" (one line per problem, all problems) for
// everything ParseJobConfig rejects, plus the service rules: parallel.rendezvous must be unset
// (the coordinator provides it), runtime.device must be cpu or cuda (no cuda:N: the worker picks
// the GPU), and with check_paths: data.train_path / data.valid_path / data.shard_dir (when used
// by data.source) and checkpoint.dir must be absolute; data paths must exist; checkpoint.dir's
// parent must exist.
[[nodiscard]] absl::StatusOr<JobSpecInfo> ParseJobSpec(const std::string& yaml_text,
                                                       const JobSpecCheckOptions& options);

}  // namespace deepnet::coordinator
