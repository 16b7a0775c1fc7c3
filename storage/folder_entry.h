#pragma once

// Files that name other files in their own folder (a shard folder's shards.json, a checkpoint's
// MANIFEST.json) are the user's: an entry "/etc/shadow", "../other-user/x" or a link in the
// folder to elsewhere must not make the reader open something outside the folder. Every such
// entry goes through FileInFolder.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace deepnet::storage {

/// Whether `name` is one plain file name: not empty, not "." or "..", no '/' and no NUL.
bool IsPlainFileName(absl::string_view name);

/// `dir`/`name` for a file that a file in `dir` names. `name` must be a plain file name
/// (IsPlainFileName), and the path with symbolic links resolved must still lie inside `dir`
/// (resolved too). INVALID_ARGUMENT "`what`: ..." naming the entry otherwise. A file that does
/// not exist passes: whoever opens it reports that.
absl::StatusOr<std::string> FileInFolder(const std::string& dir, absl::string_view name,
                                         absl::string_view what);

}  // namespace deepnet::storage
