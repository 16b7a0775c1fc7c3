#pragma once
// Which paths of a job a user may name: everything under one storage root, laid out as
//   ROOT/users/<user>/   the user's own folder: the only place (with team folders) they may write
//   ROOT/teams/<team>/   shared by the members of <team>: read and write for members only
//   ROOT/<anything else> read by every user (shared data sets), written by none
// A path is refused unless it lies under the root both as written and once resolved
// (realpath, symbolic links included), and unless the user may use that place. The coordinator
// checks a job's paths at SubmitJob, the worker daemon again before it starts a trainer. This is
// the early, clear error; the real enforcement is file ownership under the trainer's uid, since a
// path can change between the check and its use. Torch-free, no proto.

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace deepnet::storage {

// Starts the reason of every refusal (after "<field>: "); the coordinator tells a worker's
// storage refusal (final for the job) from other refused assignments by it.
inline constexpr char kStoragePolicyRefusal[] = "refused by the storage policy";

enum class PathAccess {
  kReadFile,  // An existing regular file the user may read.
  kReadDir,   // An existing directory the user may read.
  kWriteDir,  // A directory the user may write; it (and folders above it) may not exist yet.
};

// Who a job runs for: the tokens file's user name and teams (coordinator/auth/auth.h).
struct StorageUser {
  std::string name;
  std::vector<std::string> teams;
};

// Immutable after Create(), so safe for concurrent use.
class StoragePolicy {
 public:
  // `root` must be an absolute path to an existing directory. INVALID_ARGUMENT naming `flag`
  // (e.g. "--storage-root") otherwise.
  [[nodiscard]] static absl::StatusOr<StoragePolicy> Create(const std::string& root,
                                                            absl::string_view flag);

  // The root as configured (lexically normalised, no trailing '/') and as resolved.
  const std::string& root() const { return root_; }
  const std::string& resolved_root() const { return resolved_root_; }
  // ROOT/users/<user> (resolved root).
  std::string UserFolder(absl::string_view user) const;

  // OK when `user` may use `path` for `access`. Otherwise INVALID_ARGUMENT
  // "<field>: <rule> (got '<path>')", where the rule depends only on the field, the access and
  // the user: the same message for every refusal, whether the path exists or not, so that the
  // answer tells nothing about places the user may not read. Blocks on file system metadata.
  [[nodiscard]] absl::Status Check(const StorageUser& user, absl::string_view field,
                                   const std::string& path, PathAccess access) const;
  // Check()'s message without "<field>: "; empty when allowed.
  std::string Refusal(const StorageUser& user, const std::string& path, PathAccess access) const;

 private:
  StoragePolicy(std::string root, std::string resolved_root)
      : root_(std::move(root)), resolved_root_(std::move(resolved_root)) {}

  enum class Place { kOutside, kReadable, kWritable };
  // Where `path` (absolute, lexically normal, no "..") lies for `user` relative to `root`.
  static Place Classify(const StorageUser& user, const std::string& root, const std::string& path);
  bool Allowed(const StorageUser& user, const std::string& path, PathAccess access) const;

  std::string root_;
  std::string resolved_root_;
};

}  // namespace deepnet::storage
