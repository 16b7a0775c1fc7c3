// A job stored by an older version whose spec breaks today's rules is cancelled when the
// coordinator starts, never placed; a valid one is queued as before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/coordinator/coordinator_fixture.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::Worker;

class StoredSpecTest : public CoordinatorTest {
 protected:
  // Stores a queued job with `yaml` directly, as an older coordinator would have.
  std::string Store(const std::string& yaml) {
    JobRecord record = testing::NewJob("alice");
    record.spec_yaml = yaml;
    record.pipeline_stages = 1;
    record.data_parallel = 1;
    absl::StatusOr<CreateResult> created = store_.Create(record);
    EXPECT_TRUE(created.ok()) << created.status();
    return created->record.id;
  }
};

// A finished job's spec is not kept in memory (issue 25, item 6: memory grows with the jobs
// that run, not with the history): GetJob, Cancel's answer and ListJobs with specs read it from
// the store, also after a restart.
TEST_F(StoredSpecTest, AFinishedJobsSpecIsReadFromTheStoreNotKeptInMemory) {
  const std::string yaml = JobYaml(1, 1, "");
  const std::string id = Submit(yaml);
  const std::string newest = Submit(JobYaml(1, 1, ""));  // The store keeps the newest job.
  absl::StatusOr<JobView> cancelled = coordinator_->Cancel(id, "test", "alice");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  ASSERT_EQ(State(id), JobState::kCancelled);
  EXPECT_EQ(cancelled->record.spec_yaml, yaml);
  EXPECT_EQ(coordinator_->GetJob(id)->record.spec_yaml, yaml);
  ListRequestData list;
  list.include_spec = true;
  auto page = coordinator_->ListJobs(list);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->first.size(), 2u);
  for (const JobView& view : page->first) EXPECT_EQ(view.record.spec_yaml, yaml);
  list.include_spec = false;
  page = coordinator_->ListJobs(list);
  ASSERT_TRUE(page.ok());
  for (const JobView& view : page->first) EXPECT_EQ(view.record.spec_yaml, "");
  Make();  // Restarted over the same store.
  EXPECT_EQ(coordinator_->GetJob(id)->record.spec_yaml, yaml);
  // The copy GetJob shows is the store's: with the job gone from the store, GetJob cannot answer
  // from memory. An unfinished job's spec is in memory (placements need it).
  ASSERT_TRUE(store_.DeleteFinished(id).ok());
  EXPECT_FALSE(coordinator_->GetJob(id).ok());
  EXPECT_EQ(coordinator_->GetJob(newest)->record.spec_yaml, yaml);
}

TEST_F(StoredSpecTest, QueuedJobsWithSpecsBreakingTodaysRulesAreCancelledAtStart) {
  const std::string bad = Store(JobYaml(1, 1, "{start_timeout_s: 1e12}"));
  const std::string good = Store(JobYaml(1, 1, ""));
  Make();  // A coordinator started over the store.
  EXPECT_EQ(State(bad), JobState::kCancelled);
  EXPECT_THAT(coordinator_->GetJob(bad)->record.state_reason,
              HasSubstr("the spec breaks the current rules: job spec: "
                        "scheduling.start_timeout_s: must be in (0, 2592000]"));
  EXPECT_EQ(State(good), JobState::kQueued);
  Worker w = AddWorker("a", 2);
  coordinator_->Tick();
  ASSERT_EQ(w.sink->assignments.size(), 1u);
  EXPECT_EQ(w.sink->assignments[0].job_id, good);
}

}  // namespace
}  // namespace deepnet::coordinator
