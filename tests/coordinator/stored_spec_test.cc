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
