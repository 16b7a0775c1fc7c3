#pragma once
// Checking the job's `guard:` section (GuardConfig, job/job_config.h); job/job_schema.h declares
// its keys.

#include "job/job_config.h"
#include "job/yaml_reader.h"

namespace deepnet::job {

// Problems named "guard.<field>".
void ValidateGuard(const GuardConfig& guard, ConfigProblems* problems);

}  // namespace deepnet::job
