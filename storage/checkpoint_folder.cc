#include "storage/checkpoint_folder.h"

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace deepnet::storage {

std::string StepFolderName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%09lld", static_cast<long long>(step));
  return buf;
}

std::optional<int64_t> ParseStepFolderName(absl::string_view name, StepNameSpelling spelling) {
  absl::string_view digits = name;
  if (!absl::ConsumePrefix(&digits, "step_") || digits.empty() || digits.size() > 19) return {};
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return {};
  }
  int64_t step = 0;
  if (!absl::SimpleAtoi(digits, &step)) return {};
  if (spelling == StepNameSpelling::kCanonical && StepFolderName(step) != name) return {};
  return step;
}

std::optional<int64_t> StepOfCheckpointPath(absl::string_view path) {
  absl::string_view rest = path;
  absl::ConsumeSuffix(&rest, "/");
  const size_t slash = rest.rfind('/');
  const absl::string_view name = slash == absl::string_view::npos ? rest : rest.substr(slash + 1);
  return ParseStepFolderName(name, StepNameSpelling::kAnyDigits);
}

}  // namespace deepnet::storage
