#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/checkpoint_fence.h"

namespace deepnet::checkpoint {

/// What a checkpoint holds: tensors grouped into files, plus JSON metadata (step, data
/// cursor, schedule, configuration...). Tensor names are global (`encoder.layers.3.fc1.weight`,
/// `optim.exp_avg.encoder.layers.3.fc1.weight`), so a checkpoint does not depend on how the
/// model was split. Tensors are stored as raw little-endian bytes; any dtype, any shape.
struct Checkpoint {
  int64_t step = 0;
  // file name (e.g. "model.bin", "optimizer.bin") -> ordered (name, tensor) pairs.
  std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>> files;
  nlohmann::json metadata = nlohmann::json::object();

  // Finds a tensor by name in any file; undefined tensor when absent.
  torch::Tensor Find(const std::string& name) const;
};

struct CheckpointStoreOptions {
  // Folder holding step_NNNNNNNNN/ sub-folders and the `latest` pointer; created if missing.
  std::string dir;
  // Completed checkpoints to keep; older ones are deleted after a successful save. 0 keeps all.
  int keep_last = 3;
  // Who writes (storage/checkpoint_fence.h). A fenced token (attempt >= 1) claims the folder in
  // Open(), before anything is read; every later mutation (stale temporaries removed, a step
  // folder published, `latest` replaced, old checkpoints pruned) runs under the folder lock
  // after checking the token, and a newer attempt's or another job's claim refuses it
  // (storage::IsFencedOut). Attempt 0 (standalone) is not fenced.
  storage::FenceToken fence = {};
};

/// Summary of one checkpoint folder found on disk.
struct CheckpointInfo {
  int64_t step = 0;
  std::string path;
};

/// Writes and reads checkpoints atomically under one folder. A save, by one process (Save) or
/// by several ranks that each write a shard (PrepareShardedSave / WriteShard /
/// CommitShardedSave), goes through the same steps:
///   dir/step_000000100.tmp-shared-<token>/ is created; every shard file is written with a
///   "<shard>.index.json" beside it (tensor table with per-tensor SHA-256, file size and SHA-256),
///   both fsynced; the commit checks the shards, folds the indices into MANIFEST.json (every file
///   with size and SHA-256, every tensor with file, dtype, shape, offset, nbytes and SHA-256) and
///   writes metadata.json, fsyncs, renames the folder to dir/step_000000100/, fsyncs `dir`, then
///   replaces dir/latest (text: the folder name) atomically and prunes to keep_last. The rename,
///   `latest` and the pruning happen under the folder's fence lock after the fence check
///   (CheckpointStoreOptions::fence): a stale attempt's commit is refused (its temporary folder
///   removed, nothing else touched) and cannot slip in between check and rename.
/// Tensor names are global, so a checkpoint saved by one layout (pipeline stages x data-parallel
/// ranks) loads into any other: CheckpointReader reads tensors by name. A reader verifies sizes
/// and SHA-256 against the manifest; a torn or corrupted checkpoint is rejected with an error
/// naming the file, and LoadLatest falls back to the newest older checkpoint that verifies.
/// Thread-compatible: one save at a time per folder (WriteShard is static and may run
/// concurrently for different shards of one save).
class CheckpointStore {
 public:
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Open(const CheckpointStoreOptions& options);

  // Saves `checkpoint` (tensors may live on any device; they are copied to CPU): the one-writer
  // case of the sharded save, one shard per file of `checkpoint`, the process id as token.
  // Returns the final folder path.
  [[nodiscard]] absl::StatusOr<std::string> Save(const Checkpoint& checkpoint);

  // --- Sharded save: several processes write one checkpoint. The caller provides barriers. ---
  // 1. One coordinating rank: checks the fence, removes stale temporary folders of `step` (a
  //    crashed run's), then creates the empty folder dir/step_N.tmp-shared-<token> and returns
  //    its path. `token`
  //    ([A-Za-z0-9_-], at most 64 characters) names the run, e.g. the launcher's job id.
  [[nodiscard]] absl::StatusOr<std::string> PrepareShardedSave(int64_t step,
                                                              const std::string& token);
  // 2. Every writing rank (after a barrier): writes `shard_name` (a plain file name such as
  //    "stage-002.bin") holding `tensors` (global names, unique across all shards; any device)
  //    and "<shard_name>.index.json", fsyncing both. Concurrent calls for different shards of
  //    one save are safe.
  [[nodiscard]] static absl::Status WriteShard(
      const std::string& tmp_dir, const std::string& shard_name,
      const std::vector<std::pair<std::string, torch::Tensor>>& tensors);
  // 3. The coordinating rank (after a barrier): checks that exactly `shard_names` are present with
  //    valid indices whose sizes match the files (NotFound naming a missing shard), rejects a
  //    tensor name found in two shards (InvalidArgument naming both), writes metadata.json
  //    (`metadata` plus "step") and MANIFEST.json, fsyncs, renames to step_N, fsyncs the
  //    parent, replaces `latest` and prunes per keep_last. Returns the final folder. On a
  //    failure before the rename (a fencing refusal included: storage::IsFencedOut) the
  //    temporary folder is removed and nothing is committed.
  [[nodiscard]] absl::StatusOr<std::string> CommitShardedSave(
      const std::string& tmp_dir, int64_t step, const nlohmann::json& metadata,
      const std::vector<std::string>& shard_names);

  // Completed checkpoints in the order a resume tries them: the one `latest` names when it is
  // a completed folder, then the older ones newest first; without such a `latest`, all newest
  // first. The first is the step the coordinator announces for a restart.
  std::vector<CheckpointInfo> ResumeOrder() const;

  // A rollback (the training guard, train/training_guard.h): `latest` is made to name step_N
  // and every completed checkpoint newer than `step` is deleted, so that neither a resume nor
  // keep_last's count sees them any more. Runs under the same fence check and folder lock as a
  // commit (a stale attempt is refused: storage::IsFencedOut). NotFound when step_N is not a
  // completed checkpoint. Returns the folder of step_N.
  [[nodiscard]] absl::StatusOr<std::string> RollBackTo(int64_t step);

  // `failure` of a save, or the fencing refusal that explains it: once a newer attempt has
  // claimed the folder it may remove this attempt's temporary folder mid-write.
  absl::Status ExplainSaveFailure(absl::Status failure) const;

  // Loads the checkpoint `latest` names; when it fails verification, the newest older one that
  // verifies. NotFound when there is none. Each rejected checkpoint adds a message (naming
  // the file and reason) to *rejected if non-null.
  [[nodiscard]] absl::StatusOr<Checkpoint> LoadLatest(std::vector<std::string>* rejected = nullptr) const;

  // Loads one checkpoint folder, single-process or sharded, verifying the size and SHA-256 of
  // every file; Checkpoint::files has one entry per file (shard).
  [[nodiscard]] static absl::StatusOr<Checkpoint> Load(const std::string& path);

  // Completed checkpoint folders, oldest first (temporary folders are ignored).
  std::vector<CheckpointInfo> List() const;

  const std::string& dir() const { return options_.dir; }

 private:
  explicit CheckpointStore(const CheckpointStoreOptions& options) : options_(options) {}
  // After the rename of a save with `token`: prunes to keep_last (never `step`) and removes
  // temporaries left by other writers. Failures are logged, not returned.
  void CleanUpAfterCommit(int64_t step, const std::string& token) const;

  CheckpointStoreOptions options_;
};

/// Hex SHA-256 of a file's contents (streamed).
absl::StatusOr<std::string> Sha256File(const std::string& path);
/// Hex SHA-256 of a byte buffer.
std::string Sha256Hex(const void* data, size_t size);

}  // namespace deepnet::checkpoint
