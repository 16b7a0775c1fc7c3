#pragma once
// Reading, checking and dumping the job's `guard:` section (GuardConfig, job/job_config.h).

#include <yaml-cpp/yaml.h>

#include "job/job_config.h"
#include "job/yaml_reader.h"

namespace deepnet::job {

void ReadGuard(YamlMapReader reader, GuardConfig* guard);
// Problems named "guard.<field>".
void ValidateGuard(const GuardConfig& guard, ConfigProblems* problems);
void EmitGuard(YAML::Emitter& out, const GuardConfig& guard);

}  // namespace deepnet::job
