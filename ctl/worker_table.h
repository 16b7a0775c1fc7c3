#pragma once
// `deepnetctl workers` as a table: one row per worker daemon with its state, slot counts,
// devices, host resources, the jobs on it and how long ago it was heard from. Pure functions;
// thread-safe.

#include <ostream>
#include <string>

#include "deepnet/v1/job_service.pb.h"

namespace deepnet::ctl {

// "cpu x2", "cuda x8 (NVIDIA H100 80GB HBM3)"; kinds in slot order, joined with ", ".
std::string DeviceSummary(const v1::Worker& worker);
// "j-000001 (ranks 0,1), j-000002 (rank 3)" for the slots whose job the caller may see, then
// "N hidden" for used slots shown without their job; "-" when no slot is used.
std::string JobSummary(const v1::Worker& worker);

void PrintWorkerTable(const v1::ListWorkersResponse& response, std::ostream& out);

}  // namespace deepnet::ctl
