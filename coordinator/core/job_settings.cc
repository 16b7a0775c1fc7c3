#include "coordinator/core/job_settings.h"

namespace deepnet::coordinator {

JobSettings SettingsOf(const JobSpecInfo& spec) {
  JobSettings s;
  s.cuda = spec.cuda;
  s.hang_timeout_s = spec.hang_timeout_s;
  s.start_timeout_s = spec.start_timeout_s;
  s.max_steps = spec.max_steps;
  s.checkpoint_every_steps = spec.checkpoint_every_steps;
  s.labels = spec.labels;
  s.team = spec.team;
  s.memory_per_rank_bytes = spec.memory_per_rank_bytes;
  s.memory_biggest_part = spec.memory_biggest_part;
  s.memory_summary = spec.memory_summary;
  return s;
}

JobSpecInfo SpecOf(const JobRecord& record, const JobSettings& settings) {
  JobSpecInfo spec;
  spec.name = record.name;
  spec.pipeline_stages = record.pipeline_stages;
  spec.data_parallel = record.data_parallel;
  spec.priority = record.priority;
  spec.max_restarts = record.max_restarts;
  spec.checkpoint_dir = record.checkpoint_dir;
  spec.cuda = settings.cuda;
  spec.hang_timeout_s = settings.hang_timeout_s;
  spec.start_timeout_s = settings.start_timeout_s;
  spec.max_steps = settings.max_steps;
  spec.checkpoint_every_steps = settings.checkpoint_every_steps;
  spec.labels = settings.labels;
  spec.team = settings.team;
  spec.memory_per_rank_bytes = settings.memory_per_rank_bytes;
  spec.memory_biggest_part = settings.memory_biggest_part;
  spec.memory_summary = settings.memory_summary;
  return spec;
}

}  // namespace deepnet::coordinator
