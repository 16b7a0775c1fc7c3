#include "coordinator/core/checkpoint_listing.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "storage/checkpoint_folder.h"

namespace deepnet::coordinator {
namespace fs = std::filesystem;

namespace {

int64_t ToUnixMs(fs::file_time_type t) {
  // file_time_type's clock is not system_clock in C++17; shift by the two clocks' "now".
  const auto system_now = std::chrono::system_clock::now();
  const auto file_now = fs::file_time_type::clock::now();
  const auto as_system = system_now + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                          t - file_now);
  return std::chrono::duration_cast<std::chrono::milliseconds>(as_system.time_since_epoch())
      .count();
}

int64_t FolderBytes(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const auto size = it->file_size(size_ec);
      if (!size_ec) total += static_cast<int64_t>(size);
    }
  }
  return total;
}

}  // namespace

absl::StatusOr<std::vector<CheckpointView>> ListCheckpointFolders(const std::string& dir,
                                                                  bool with_sizes) {
  std::vector<CheckpointView> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  std::string latest;
  {
    std::ifstream in(fs::path(dir) / storage::kLatestFileName);
    if (in) std::getline(in, latest);
    absl::StripAsciiWhitespace(&latest);
  }
  fs::directory_iterator it(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint folder ", dir, " cannot be read: ", ec.message()));
  }
  for (const fs::directory_entry& entry : it) {
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
    view.size_bytes = with_sizes ? FolderBytes(entry.path()) : 0;
    view.latest = name == latest;
    out.push_back(std::move(view));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointView& a, const CheckpointView& b) { return a.step < b.step; });
  return out;
}

}  // namespace deepnet::coordinator
