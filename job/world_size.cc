#include "job/world_size.h"

#include "absl/strings/str_cat.h"

namespace deepnet::job {

absl::Status CheckStagesAndReplicas(int64_t pipeline_stages, int64_t data_parallel) {
  if (pipeline_stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallel.pipeline_stages must be positive, got ", pipeline_stages));
  }
  if (data_parallel < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallel.data_parallel must be positive, got ", data_parallel));
  }
  return absl::OkStatus();
}

absl::Status CheckWorldSize(int64_t pipeline_stages, int64_t data_parallel) {
  if (absl::Status s = CheckStagesAndReplicas(pipeline_stages, data_parallel); !s.ok()) return s;
  if (!WithinRankCap(pipeline_stages, data_parallel)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parallel.pipeline_stages x parallel.data_parallel = ", pipeline_stages, " x ",
        data_parallel, " exceeds the limit of ", SpecCaps::kRanks, " ranks"));
  }
  return absl::OkStatus();
}

}  // namespace deepnet::job
