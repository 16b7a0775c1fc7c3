#include "coordinator/core/checkpoint_listing.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "storage/checkpoint_folder.h"
#include "storage/guarded_read.h"

namespace deepnet::coordinator {
namespace fs = std::filesystem;

namespace {

// A step folder's name is under 30 bytes; the cap leaves room for whitespace and nothing more.
constexpr size_t kMaxLatestFileBytes = 4096;

int64_t ToUnixMs(fs::file_time_type t) {
  // file_time_type's clock is not system_clock in C++17; shift by the two clocks' "now".
  const auto system_now = std::chrono::system_clock::now();
  const auto file_now = fs::file_time_type::clock::now();
  const auto as_system =
      system_now + std::chrono::duration_cast<std::chrono::system_clock::duration>(t - file_now);
  return std::chrono::duration_cast<std::chrono::milliseconds>(as_system.time_since_epoch())
      .count();
}

// Counts the entries a listing visits against its limits; the first error sticks.
class Walk {
 public:
  Walk(const std::string& dir, const ListingLimits& limits) : dir_(dir), limits_(limits) {}
  // False (and status() says why) once a limit is passed.
  bool Visit() {
    if (!status_.ok()) return false;
    if (++entries_ > limits_.max_entries) {
      status_ = absl::ResourceExhaustedError(
          absl::StrCat("checkpoint folder ", dir_, " holds more than ", limits_.max_entries,
                       " entries; the coordinator does not list it"));
      return false;
    }
    if (entries_ % 64 == 0 && std::chrono::steady_clock::now() > limits_.deadline) {
      status_ = absl::DeadlineExceededError(
          absl::StrCat("listing checkpoint folder ", dir_, " took too long; try again"));
      return false;
    }
    return true;
  }
  const absl::Status& status() const { return status_; }

 private:
  const std::string& dir_;
  const ListingLimits& limits_;
  size_t entries_ = 0;
  absl::Status status_;
};

int64_t FolderBytes(const fs::path& dir, Walk& walk) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!walk.Visit()) return total;
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const auto size = it->file_size(size_ec);
      if (!size_ec) total += static_cast<int64_t>(size);
    }
  }
  return total;
}

}  // namespace

std::string ReadLatestPointer(const std::string& dir) {
  const std::string path = (fs::path(dir) / storage::kLatestFileName).string();
  absl::StatusOr<std::string> text = storage::ReadGuardedFile(path, kMaxLatestFileBytes);
  if (!text.ok()) {
    // Debug only: a user decides what is there, and must not be able to fill the log.
    if (!absl::IsNotFound(text.status())) spdlog::debug("{}", text.status().ToString());
    return "";
  }
  const absl::string_view name = absl::StripAsciiWhitespace(*text);
  if (absl::StrContains(name, '\n') ||
      !storage::ParseStepFolderName(name, storage::StepNameSpelling::kAnyDigits)) {
    spdlog::debug("{} does not name a step folder; ignored", path);
    return "";
  }
  return std::string(name);
}

std::optional<int64_t> LatestCompleteStep(const std::string& dir) {
  const std::string latest = ReadLatestPointer(dir);
  if (latest.empty()) return std::nullopt;
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(dir) / latest / storage::kManifestFileName, ec)) {
    return std::nullopt;
  }
  return storage::ParseStepFolderName(latest, storage::StepNameSpelling::kAnyDigits);
}

absl::StatusOr<std::vector<CheckpointView>> ListCheckpointFolders(const std::string& dir,
                                                                  bool with_sizes,
                                                                  const ListingLimits& limits) {
  std::vector<CheckpointView> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  // `latest` is the user's file: a link to /dev/zero or a FIFO there must neither grow nor block
  // the coordinator. One that cannot be read marks no folder latest.
  const std::string latest = ReadLatestPointer(dir);
  fs::directory_iterator it(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint folder ", dir, " cannot be read: ", ec.message()));
  }
  Walk walk(dir, limits);
  for (fs::directory_iterator end; it != end; it.increment(ec)) {
    if (ec || !walk.Visit()) break;
    const fs::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    const std::optional<int64_t> step =
        storage::ParseStepFolderName(name, storage::StepNameSpelling::kAnyDigits);
    if (!step) continue;
    const fs::path manifest = entry.path() / storage::kManifestFileName;
    std::error_code mec;
    if (!fs::is_regular_file(manifest, mec)) continue;
    CheckpointView view;
    view.step = *step;
    view.path = entry.path().string();
    view.time_ms = ToUnixMs(fs::last_write_time(manifest, mec));
    view.size_bytes = with_sizes ? FolderBytes(entry.path(), walk) : 0;
    view.latest = name == latest;
    out.push_back(std::move(view));
  }
  if (!walk.status().ok()) return walk.status();
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint folder ", dir, " cannot be read: ", ec.message()));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointView& a, const CheckpointView& b) { return a.step < b.step; });
  return out;
}

}  // namespace deepnet::coordinator
