#include "storage/storage_policy.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace deepnet::storage {
namespace {

// Paths longer than this are refused (and cut in messages).
constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxEchoBytes = 256;

// The components of an absolute path, without empty ones ("//", trailing '/') and ".". False
// when it is not absolute, holds a NUL byte or a ".." component, or is too long.
bool SplitAbsolute(const std::string& path, std::vector<std::string>* parts) {
  if (path.empty() || path.size() > kMaxPathBytes || path[0] != '/') return false;
  if (path.find('\0') != std::string::npos) return false;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") return false;
    parts->emplace_back(part);
  }
  return true;
}

std::string JoinAbsolute(const std::vector<std::string>& parts, size_t count) {
  if (count == 0) return "/";
  std::string out;
  for (size_t i = 0; i < count; ++i) absl::StrAppend(&out, "/", parts[i]);
  return out;
}

// realpath(3) into a std::string; false with errno set on failure.
bool RealPath(const std::string& path, std::string* out) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) == nullptr) return false;
  *out = buffer;
  return true;
}

// A valid user or team name for a folder (no '/', not "." or "..", not empty).
bool FolderName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::string Echo(const std::string& path) {
  std::string shown = path.size() > kMaxEchoBytes ? path.substr(0, kMaxEchoBytes) + "..." : path;
  return absl::CHexEscape(shown);
}

}  // namespace

absl::StatusOr<StoragePolicy> StoragePolicy::Create(const std::string& root,
                                                    absl::string_view flag) {
  std::vector<std::string> parts;
  if (!SplitAbsolute(root, &parts)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": must be an absolute path without '..' (got '", Echo(root), "')"));
  }
  std::string resolved;
  if (!RealPath(root, &resolved)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", Echo(root), ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (stat(resolved.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", Echo(root), " is not a directory"));
  }
  return StoragePolicy(JoinAbsolute(parts, parts.size()), resolved);
}

std::string StoragePolicy::UserFolder(absl::string_view user) const {
  return absl::StrCat(resolved_root_ == "/" ? "" : resolved_root_, "/users/", user);
}

StoragePolicy::Place StoragePolicy::Classify(const StorageUser& user, const std::string& root,
                                             const std::string& path) {
  if (path == root) return Place::kReadable;
  const std::string prefix = root == "/" ? "/" : root + "/";
  if (path.compare(0, prefix.size(), prefix) != 0) return Place::kOutside;
  const std::vector<std::string> rel =
      absl::StrSplit(path.substr(prefix.size()), '/', absl::SkipEmpty());
  if (rel.empty()) return Place::kReadable;
  if (rel[0] != "users" && rel[0] != "teams") return Place::kReadable;
  if (rel.size() == 1) return Place::kReadable;  // The listing of users/ or teams/ itself.
  const std::string& owner = rel[1];
  if (rel[0] == "users") {
    return FolderName(user.name) && owner == user.name ? Place::kWritable : Place::kOutside;
  }
  const bool member = FolderName(owner) &&
                      std::find(user.teams.begin(), user.teams.end(), owner) != user.teams.end();
  return member ? Place::kWritable : Place::kOutside;
}

bool StoragePolicy::Allowed(const StorageUser& user, const std::string& path,
                            PathAccess access) const {
  const Place needed = access == PathAccess::kWriteDir ? Place::kWritable : Place::kReadable;
  std::vector<std::string> parts;
  if (!SplitAbsolute(path, &parts)) return false;
  // As written: decided without touching the file system, so nothing is learnt about places
  // the user may not read (a symbolic link inside another user's folder is never followed).
  const std::string lexical = JoinAbsolute(parts, parts.size());
  const Place as_written =
      std::max(Classify(user, root_, lexical), Classify(user, resolved_root_, lexical));
  if (as_written < needed) return false;
  // As resolved: the deepest existing ancestor through realpath, plus what does not exist yet.
  size_t existing = parts.size();
  std::string resolved;
  while (!RealPath(JoinAbsolute(parts, existing), &resolved)) {
    if (errno != ENOENT || existing == 0) return false;
    --existing;
  }
  struct stat st {};
  if (stat(resolved.c_str(), &st) != 0) return false;
  if (existing == parts.size()) {
    if (Classify(user, resolved_root_, resolved) < needed) return false;
    return access == PathAccess::kReadFile ? S_ISREG(st.st_mode) : S_ISDIR(st.st_mode);
  }
  // Missing parts: only a folder to be written may not exist yet, below an existing folder.
  if (access != PathAccess::kWriteDir || !S_ISDIR(st.st_mode)) return false;
  std::string candidate = resolved == "/" ? "" : resolved;
  // A name that lstat finds but realpath does not is a dangling symbolic link: refused, since
  // creating the folder would follow it.
  struct stat link {};
  if (lstat((candidate + "/" + parts[existing]).c_str(), &link) == 0) return false;
  for (size_t i = existing; i < parts.size(); ++i) absl::StrAppend(&candidate, "/", parts[i]);
  return Classify(user, resolved_root_, candidate) >= needed;
}

absl::Status StoragePolicy::Check(const StorageUser& user, absl::string_view field,
                                  const std::string& path, PathAccess access) const {
  const std::string refusal = Refusal(user, path, access);
  if (refusal.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", refusal));
}

std::string StoragePolicy::Refusal(const StorageUser& user, const std::string& path,
                                   PathAccess access) const {
  if (Allowed(user, path, access)) return "";
  const std::string& root = root_;
  std::string rule;
  const std::string except =
      absl::StrCat("anywhere under ", root, "/ except ", root, "/users/<other user>/ and ", root,
                   "/teams/<team>/ of teams ", user.name, " is not in");
  switch (access) {
    case PathAccess::kReadFile:
      rule = absl::StrCat("must be an existing regular file that user ", user.name,
                          " may read: ", except);
      break;
    case PathAccess::kReadDir:
      rule = absl::StrCat("must be an existing directory that user ", user.name,
                          " may read: ", except);
      break;
    case PathAccess::kWriteDir:
      rule = absl::StrCat("must be a directory (existing or not) that user ", user.name,
                          " may write: under ", root, "/users/", user.name, "/",
                          user.teams.empty() ? std::string()
                                             : absl::StrCat(" or ", root, "/teams/{",
                                                            absl::StrJoin(user.teams, ","), "}/"));
      break;
  }
  return absl::StrCat(kStoragePolicyRefusal, ": ", rule,
                      " (absolute, no '..', symbolic links resolved) (got '", Echo(path), "')");
}

}  // namespace deepnet::storage
