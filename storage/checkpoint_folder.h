#pragma once

// The names inside a checkpoint folder (a job's checkpoint.dir on shared storage), in one place
// for the trainer that writes them (checkpoint/), the coordinator that lists them for
// `deepnetctl get` and the worker that reads them from trainer output:
//
//   DIR/step_000001500/MANIFEST.json   one complete checkpoint per step folder
//   DIR/step_000001500.tmp-...         being written (never read as a checkpoint)
//   DIR/latest                         the name of the newest good step folder, one line
//
// Pure functions; thread-safe.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace deepnet::storage {

inline constexpr char kManifestFileName[] = "MANIFEST.json";
inline constexpr char kLatestFileName[] = "latest";

/// "step_000001500": "step_" and the step in nine or more digits, the one spelling writers use.
std::string StepFolderName(int64_t step);

enum class StepNameSpelling {
  kCanonical,  // Only StepFolderName(step): step_1 and step_000000001 cannot both count.
  kAnyDigits,  // step_ and 1-19 digits, as older trainers and hand-made folders spell them.
};
/// The step of a step folder's name; nullopt for anything else (".tmp-" folders, garbage).
std::optional<int64_t> ParseStepFolderName(
    absl::string_view name, StepNameSpelling spelling = StepNameSpelling::kCanonical);
/// The step of a path whose last component (a trailing '/' allowed) is a step folder name of
/// any digits, e.g. "/shared/ckpt/step_000001500/"; nullopt otherwise.
std::optional<int64_t> StepOfCheckpointPath(absl::string_view path);

}  // namespace deepnet::storage
