#include "storage/folder_entry.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace deepnet::storage {

namespace fs = std::filesystem;

bool IsPlainFileName(absl::string_view name) {
  return !name.empty() && name != "." && name != ".." && !absl::StrContains(name, '/') &&
         !absl::StrContains(name, '\0');
}

absl::StatusOr<std::string> FileInFolder(const std::string& dir, absl::string_view name,
                                         absl::string_view what) {
  if (!IsPlainFileName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", name, "' is not a plain file name in ", dir,
                     " (no '/', no '..'): files it names must be in the same folder"));
  }
  const fs::path joined = fs::path(dir) / std::string(name);
  std::error_code ec;
  fs::path real_dir = fs::weakly_canonical(dir, ec);
  if (ec) return joined.string();  // The folder itself is unreadable: the open reports it.
  if (!real_dir.has_filename()) real_dir = real_dir.parent_path();  // "DIR/" names DIR.
  const fs::path real = fs::weakly_canonical(joined, ec);
  if (ec) return joined.string();
  // The resolved file must sit directly in the resolved folder.
  if (real.parent_path() != real_dir) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", name, "' in ", dir, " is a link to ", real.string(),
                     ", outside the folder: files it names must be in the same folder"));
  }
  return joined.string();
}

}  // namespace deepnet::storage
