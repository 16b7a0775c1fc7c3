#pragma once
// A job's spec held once: the fields a JobRecord stores (name, P, D, priority, max_restarts,
// checkpoint dir) live in the record only, the rest in JobSettings.

#include <cstdint>
#include <map>
#include <string>

#include "coordinator/core/job_spec.h"
#include "coordinator/store/job_store.h"

namespace deepnet::coordinator {

// What a job's spec says beyond the fields its JobRecord stores (name, P, D, priority,
// max_restarts and checkpoint dir live in the record only).
struct JobSettings {
  bool cuda = false;
  double hang_timeout_s = 0;  // 0: off
  double start_timeout_s = 300;
  int64_t max_steps = 0;
  int64_t checkpoint_every_steps = 0;
  std::map<std::string, std::string> labels;
  std::string team;
  int64_t memory_per_rank_bytes = 0;
  std::string memory_biggest_part;
  std::string memory_summary;
};

// The fields of `spec` its JobRecord does not store.
JobSettings SettingsOf(const JobSpecInfo& spec);
// The spec as the API shows it: the record's fields and the settings.
JobSpecInfo SpecOf(const JobRecord& record, const JobSettings& settings);

}  // namespace deepnet::coordinator
