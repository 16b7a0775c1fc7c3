// Memory admission: the coordinator estimates each job's memory per rank (job/memory_estimate.h),
// refuses a job larger than the largest slot the cluster can have (--cluster-slot-memory), and
// queues a job larger than the registered slots with a reason naming memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace deepnet::coordinator {
namespace {

using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::Worker;

constexpr int64_t kGiB = int64_t{1} << 30;

// A model that is valid but needs hundreds of GiB per rank (38e9 parameters, Adam included).
std::string HugeJobYaml() {
  return "name: huge\n"
         "model: {encoder_layers: 24, decoder_layers: 24, d_model: 8192, heads: 64, "
         "ffn_dim: 32768}\n"
         "train: {max_steps: 10}\n";
}

class CoordinatorAdmissionTest : public CoordinatorTest {
 protected:
  JobView Job(const std::string& id) { return *coordinator_->GetJob(id); }
};

TEST_F(CoordinatorAdmissionTest, EveryJobCarriesItsEstimate) {
  const std::string id = Submit(JobYaml(1, 1, ""));
  const JobView job = Job(id);
  EXPECT_GT(job.spec.memory_per_rank_bytes, 0);
  EXPECT_LT(job.spec.memory_per_rank_bytes, kGiB);
  EXPECT_FALSE(job.spec.memory_biggest_part.empty());
  EXPECT_GT(coordinator_->ParseSpec(HugeJobYaml())->memory_per_rank_bytes, 100 * kGiB);
}

TEST_F(CoordinatorAdmissionTest, ClusterSlotMemoryRefusesJobsNoSlotCouldHold) {
  options_.cluster_slot_memory = 80 * kGiB;
  Make();
  EXPECT_TRUE(coordinator_->ParseSpec(JobYaml(2, 2, "")).ok());
  const absl::Status refused = coordinator_->ParseSpec(HugeJobYaml()).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("job spec: needs an estimated "));
  EXPECT_THAT(refused.message(),
              HasSubstr("per rank, but the largest slot of this cluster has 80.00 GiB "
                        "(--cluster-slot-memory); the biggest part is optimizer state"));
  // Registered slots do not matter: the bound decides.
  AddWorker("big", 1, {}, 4096 * kGiB);
  EXPECT_EQ(coordinator_->ParseSpec(HugeJobYaml()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(CoordinatorAdmissionTest, WithoutTheBoundAJobWaitsForASlotWithEnoughMemory) {
  Worker small = AddWorker("small", 2, {}, 1 << 20);  // 1 MiB slots
  const std::string id = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_EQ(Job(id).pending_code, PendingCode::kExceedsSlotMemory);
  EXPECT_THAT(Job(id).record.state_reason,
              HasSubstr("waiting for a slot with enough memory: each rank needs an estimated "));
  EXPECT_THAT(Job(id).record.state_reason,
              HasSubstr("but the largest slot of the ready workers has 1.00 MiB"));

  Worker big = AddWorker("big", 1, {}, 64 * kGiB);
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  EXPECT_TRUE(small.sink->assignments.empty());
  EXPECT_EQ(big.sink->assignments.size(), 1u);
}

TEST_F(CoordinatorAdmissionTest, RanksAreOnlyPlacedOnSlotsWithEnoughMemory) {
  Worker small = AddWorker("small", 4, {}, 1 << 20);
  Worker big = AddWorker("big", 2, {}, 64 * kGiB);
  const std::string wide = Submit(JobYaml(2, 2, ""));  // 4 ranks: only 2 slots hold one
  const std::string narrow = Submit(JobYaml(2, 1, ""));
  coordinator_->Tick();
  EXPECT_EQ(Job(wide).pending_code, PendingCode::kExceedsRegistered);
  EXPECT_THAT(Job(wide).record.state_reason, HasSubstr("; 2 of the ready slots have the "));
  EXPECT_EQ(State(narrow), JobState::kStarting);
  EXPECT_TRUE(small.sink->assignments.empty());
  ASSERT_EQ(big.sink->assignments.size(), 1u);
  EXPECT_EQ(big.sink->assignments[0].ranks.size(), 2u);
}

TEST_F(CoordinatorAdmissionTest, SlotsOfUnknownMemoryHoldAnyJob) {
  Worker unknown = AddWorker("unknown", 1);
  const std::string id = Submit(HugeJobYaml());
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  EXPECT_EQ(unknown.sink->assignments.size(), 1u);
}

}  // namespace
}  // namespace deepnet::coordinator
