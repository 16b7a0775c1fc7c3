#pragma once
// The live view of `deepnetctl watch`: the progress line redrawn in place on a terminal, and one
// line per job event. Pure functions; thread-safe.

#include <cstdint>
#include <string>

#include "deepnet/v1/job_service.pb.h"

namespace deepnet::ctl {

// What the progress line shows: the job's latest state and its latest metric point.
struct ProgressView {
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  // Shown while RECOVERING.
  v1::RecoveryCause recovery_cause = v1::RECOVERY_CAUSE_UNSPECIFIED;
  // Attempts started so far; 0 before the first placement (not shown then).
  int32_t attempt = 0;
  // Latest optimiser step, and the job's total; 0 max_steps: unknown (no bar).
  int64_t step = 0;
  int64_t max_steps = 0;
  // False until the first metric point arrived; loss, tokens/s and lr are shown only then.
  bool has_metrics = false;
  double loss = 0;
  double tokens_per_s = 0;
  double lr = 0;
};

// Updates the view from a job snapshot / a state-change event / a metric point.
void ApplyJob(const v1::Job& job, ProgressView* view);
void ApplyEvent(const v1::JobEvent& event, ProgressView* view);
void ApplyPoint(const v1::MetricPoint& point, ProgressView* view);

// The progress line, at most `width` columns (no newline, no control characters), e.g.
// "[##########----------]  50% step 500/1000  loss 2.3412  12.3k tok/s  lr 3.00e-04  RUNNING
// attempt 1". The bar shrinks, then the least important fields go, when `width` is small.
// Without `with_bar` (plain, non-terminal output) there is no bar and no percentage.
std::string RenderProgressLine(const ProgressView& view, int width, bool with_bar = true);

// One line for an event, prefixed by its local ISO-8601 time, e.g.
// "2026-11-24T14:03:07+01:00  state RUNNING -> RECOVERING (rank exit): rank 3 exited".
std::string DescribeEvent(const v1::JobEvent& event);

// One line for the snapshot a watch starts with, e.g. "job j-000042 (wmt) RUNNING, step
// 450/1000, attempt 2" plus the pending reason or message when set; a queued job's pending code
// follows its state ("QUEUED (exceeds_registered)").
std::string DescribeSnapshot(const v1::Job& job);

}  // namespace deepnet::ctl
