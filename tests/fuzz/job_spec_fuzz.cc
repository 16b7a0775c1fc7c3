// libFuzzer entry point for the job-spec reader: arbitrary bytes through the coordinator's
// ParseJobSpec and the trainer's ParseJobConfig (YAML limits, schema, ranges, service rules).
// Besides crashes, sanitizer reports, timeouts and out-of-memory, these are bugs (abort):
// an error longer than the documented cap, an error that is not INVALID_ARGUMENT, and a
// config that parses but whose dump does not parse back to the same dump.
// Build and run: docs/DATA.md, "Fuzzing"; bench/fuzz_job_spec.sh.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "coordinator/core/job_spec.h"
#include "job/job_config.h"

namespace {

// ConfigProblems::kMaxBytes plus the "... and N more problems" line.
constexpr size_t kMaxErrorBytes = 4096;

void CheckError(const absl::Status& status) {
  if (status.ok()) return;
  if (status.code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (status.message().size() > kMaxErrorBytes || status.message().empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepnet;
  const std::string text(reinterpret_cast<const char*>(data), size);

  coordinator::JobSpecCheckOptions options;
  options.check_paths = false;  // No file system access: fast and deterministic.
  CheckError(coordinator::ParseJobSpec(text, options).status());

  absl::StatusOr<job::JobConfig> config = job::ParseJobConfig(text, {}, "fuzz");
  CheckError(config.status());
  if (config.ok()) {
    const std::string dumped = job::DumpJobConfig(*config);
    absl::StatusOr<job::JobConfig> again = job::ParseJobConfig(dumped, {}, "dump");
    if (!again.ok() || job::DumpJobConfig(*again) != dumped) std::abort();
  }
  return 0;
}
