// The divergence guard under the coordinator: its events in the metric stream become job events
// and metrics, and a trainer that exits because the guard gave up fails the job without restarts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/core/coordinator.h"
#include "coordinator/core/coordinator_metrics.h"
#include "job/job_config.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace deepnet::coordinator {
namespace {

using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::Worker;

MetricPoint GuardPoint(int64_t step, const std::string& event, const std::string& trigger,
                        int64_t to_step, int retries, const std::string& message) {
  MetricPoint p;
  p.step = step;
  p.guard_event = event;
  p.guard_trigger = trigger;
  p.guard_to_step = to_step;
  p.guard_retries = retries;
  p.guard_message = message;
  return p;
}

TEST_F(CoordinatorTest, GuardEventsBecomeJobEventsAndAnExhaustedGuardFailsWithoutRestarts) {
  std::unique_ptr<CoordinatorMetrics> metrics = *CoordinatorMetrics::Create("", 100);
  metrics_ = metrics.get();
  Make();
  Worker a = AddWorker("a", 1);
  const std::string id = Submit(JobYaml(1, 1, "{max_restarts: 5}"));
  coordinator_->Tick();
  Running(a);
  MetricReport report{id, 1, 0, {}, {}};
  report.points.push_back({7, 2.5});
  report.points.push_back(GuardPoint(8, "rollback", "nonfinite_loss", 6, 1,
                                     "step 8: loss is nan; rolled back to step 6"));
  report.points.push_back(GuardPoint(20, "plateau", "", 0, 0, "flat"));
  ASSERT_TRUE(coordinator_->OnMetrics("a", a.epoch, report).ok());
  // Guard points are events, not points of the series.
  PointBatch batch =
      *coordinator_->WaitPoints(id, *coordinator_->PointCursor(id, 0, false), absl::ZeroDuration());
  ASSERT_EQ(batch.points.size(), 1u);
  EXPECT_EQ(batch.points[0].step, 7);
  const std::string text = metrics->Serialize();
  EXPECT_THAT(text, HasSubstr("deepnet_job_guard_rollbacks_total{job=\"" + id + "\"} 1"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_plateau{job=\"" + id + "\"} 1"));

  // Retries run out: the trainer reports the guard's failure and exits with code 78.
  MetricReport last{id, 1, 0, {}, {}};
  last.points.push_back(GuardPoint(8, "fail", "nonfinite_loss", 0, 3,
                                   "guard: step 8: loss is nan; retries exhausted"));
  ASSERT_TRUE(coordinator_->OnMetrics("a", a.epoch, last).ok());
  ASSERT_TRUE(coordinator_
                  ->OnTrainerExit(a.id, a.epoch,
                                  {id, 1, 0, job::kGuardExhaustedExitCode, 0,
                                   "deepnet train: guard: step 8: loss is nan; retries "
                                   "exhausted (3 of 3 rollbacks used)\n",
                                   false})
                  .ok());
  coordinator_->Tick();
  const JobView job = *coordinator_->GetJob(id);
  EXPECT_EQ(job.record.state, JobState::kFailed);
  EXPECT_EQ(job.record.restarts, 0);
  EXPECT_THAT(job.record.state_reason, HasSubstr("retries exhausted (3 of 3 rollbacks used)"));
  EXPECT_THAT(job.record.state_reason, HasSubstr("divergence guard: not restarted"));

  std::vector<JobEventView> rollbacks, plateaus, failures;
  for (const JobEventView& e : Events(id)) {
    if (e.type == EventType::kGuardRollback) rollbacks.push_back(e);
    if (e.type == EventType::kPlateau) plateaus.push_back(e);
    if (e.type == EventType::kGuardFailed) failures.push_back(e);
  }
  ASSERT_EQ(rollbacks.size(), 1u);
  EXPECT_EQ(rollbacks[0].guard_trigger, "nonfinite_loss");
  EXPECT_EQ(rollbacks[0].guard_to_step, 6);
  EXPECT_EQ(rollbacks[0].guard_retries, 1);
  EXPECT_EQ(rollbacks[0].message, "step 8: loss is nan; rolled back to step 6");
  EXPECT_EQ(rollbacks[0].attempt, 1);
  ASSERT_EQ(plateaus.size(), 1u);
  EXPECT_EQ(plateaus[0].message, "flat");
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].guard_retries, 3);
  EXPECT_THAT(failures[0].message, HasSubstr("retries exhausted"));
}

}  // namespace
}  // namespace deepnet::coordinator
