// The trainer's memory admission: the budget read from /proc and cgroup files (fakes here), and
// Trainer::Create refusing an absurd model before anything of it is allocated.
#include "train/memory_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "job/job_config.h"
#include "tests/temp_dir.h"
#include "train/trainer.h"

namespace deepnet::train {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

constexpr int64_t kGiB = int64_t{1} << 30;

class MemoryBudgetTest : public ::testing::Test {
 protected:
  void Write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = std::filesystem::path(dir_.path()) / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  MemorySources Sources() {
    MemorySources s;
    s.meminfo = dir_.path() + "/meminfo";
    s.self_cgroup = dir_.path() + "/self_cgroup";
    s.cgroup_root = dir_.path() + "/cg";
    return s;
  }
  TempDir dir_;
};

TEST_F(MemoryBudgetTest, MemAvailableIsSharedByTheRanksOfTheHost) {
  Write("meminfo", "MemTotal:       67108864 kB\nMemAvailable:   33554432 kB\n");
  EXPECT_EQ(AvailableMemory(false, 1, Sources()).bytes, 32 * kGiB);
  const MemoryBudget four = AvailableMemory(false, 4, Sources());
  EXPECT_EQ(four.bytes, 8 * kGiB);
  EXPECT_THAT(four.source, HasSubstr("/ 4 ranks"));
}

TEST_F(MemoryBudgetTest, CgroupLimitAndSlotMemoryBoundIt) {
  Write("meminfo", "MemAvailable:   33554432 kB\n");
  Write("self_cgroup", "0::/jobs/a\n");
  Write("cg/jobs/a/memory.max", std::to_string(6 * kGiB) + "\n");
  Write("cg/jobs/a/memory.current", std::to_string(2 * kGiB) + "\n");
  MemoryBudget budget = AvailableMemory(false, 1, Sources());
  EXPECT_EQ(budget.bytes, 4 * kGiB);
  EXPECT_THAT(budget.source, HasSubstr("cgroup"));
  Write("cg/jobs/a/memory.max", "max\n");
  EXPECT_EQ(AvailableMemory(false, 1, Sources()).bytes, 32 * kGiB);

  MemorySources slot = Sources();
  slot.slot_memory = std::to_string(kGiB);
  EXPECT_EQ(AvailableMemory(false, 1, slot).bytes, kGiB);
  // CUDA: only the slot's (GPU) memory is known; host memory says nothing about the device.
  EXPECT_EQ(AvailableMemory(true, 1, slot).bytes, kGiB);
  EXPECT_EQ(AvailableMemory(true, 1, Sources()).bytes, 0);
}

TEST(MemoryCheckTest, UnknownBudgetChecksNothing) {
  job::MemoryEstimate huge;
  huge.largest.total_bytes = job::kMemoryUnbounded;
  EXPECT_TRUE(CheckMemory(huge, MemoryBudget{}).ok());
}

// d_model 16384, FFN 65536: about 2.6e9 parameters x 16 bytes, 40 GiB per rank and more.
TEST(MemoryCheckTest, AbsurdModelExitsBeforeAllocating) {
  job::JobConfig c;
  c.model = model::DeepNetConfig()
                .encoder_layers(1)
                .decoder_layers(1)
                .d_model(16384)
                .heads(16)
                .ffn_dim(65536)
                .vocab_size(0)
                .max_positions(64);
  c.data.synthetic.languages = {"rev"};
  c.data.synthetic.pairs_per_language = 20;
  c.data.max_len = 60;
  c.train.max_steps = 1;
  TrainerIo io;
  io.memory = MemoryBudget{4 * kGiB, "test budget"};
  auto trainer = Trainer::Create(c, io);
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(trainer.status().message(), HasSubstr("not enough memory: this model needs"));
  EXPECT_THAT(trainer.status().message(), HasSubstr("but 4.00 GiB is available (test budget)"));
  EXPECT_THAT(trainer.status().message(), HasSubstr("the biggest part is optimizer state"));
}

}  // namespace
}  // namespace deepnet::train
