#pragma once
// The one check of a job's P x D layout (parallel.pipeline_stages x parallel.data_parallel),
// shared by the schema (job/job_config.cc), the coordinator's job store and its gang scheduler.
// Widths: P and D are int64_t on the job side (every integer of the schema is read as int64 and
// bounded here before anything narrows it); SpecCaps::kRanks keeps P x D inside the int32 of the
// wire (deepnet.v1.JobSpec) and of a rank number.

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "job/job_config.h"

namespace deepnet::job {

static_assert(SpecCaps::kRanks <= std::numeric_limits<int32_t>::max(),
              "ranks are int32 on the wire and in the launchers");

/// P >= 1 and D >= 1. InvalidArgument naming the field, e.g.
/// "parallel.pipeline_stages must be positive, got 0".
[[nodiscard]] absl::Status CheckStagesAndReplicas(int64_t pipeline_stages, int64_t data_parallel);

/// Whether P x D <= SpecCaps::kRanks, compared without forming the product; P, D >= 1.
inline bool WithinRankCap(int64_t pipeline_stages, int64_t data_parallel) {
  return pipeline_stages <= SpecCaps::kRanks / data_parallel;
}

/// CheckStagesAndReplicas and WithinRankCap: InvalidArgument "parallel.pipeline_stages x
/// parallel.data_parallel = P x D exceeds the limit of 65536 ranks" beyond the cap.
[[nodiscard]] absl::Status CheckWorldSize(int64_t pipeline_stages, int64_t data_parallel);

}  // namespace deepnet::job
