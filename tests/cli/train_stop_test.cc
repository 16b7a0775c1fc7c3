// How `deepnet train` ends when a signal stops it (cli/train_stop.h, job/stop_exit.h): the exit
// code and the one-line message for each ending, the start-up watch, and a stop before the first
// step of a resumed run (no checkpoint written: the state is the resumed one).
#include "cli/train_stop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "job/job_config.h"
#include "job/stop_exit.h"
#include "tests/file_text.h"
#include "tests/temp_dir.h"
#include "train/trainer.h"

namespace deepnet::cli {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

StopEnding Describe(int64_t start, int64_t final_step, bool checkpointing,
                    const std::string& checkpoint = "") {
  return DescribeSignalStop(start, final_step, checkpoint, checkpointing);
}

TEST(TrainStopTest, EachEndingHasItsExitCodeAndSaysWhatHappened) {
  StopEnding e = Describe(0, 7, true, "/ck/step_000000007");
  EXPECT_EQ(e.exit_code, 143);
  EXPECT_THAT(e.message, HasSubstr("at step 7: checkpoint written (/ck/step_000000007)"));

  e = Describe(5, 5, true);
  EXPECT_EQ(e.exit_code, 143);
  EXPECT_THAT(e.message, HasSubstr("before its first step: no checkpoint written (none needed): "
                                   "its state is the checkpoint of step 5 it resumed from, "
                                   "unchanged"));

  e = Describe(0, 0, true);
  EXPECT_EQ(e.exit_code, job::kStoppedNothingTrainedExitCode);
  EXPECT_EQ(e.exit_code, 79);
  EXPECT_THAT(e.message, HasSubstr("nothing was trained, so no checkpoint was written (none "
                                   "needed); a rerun starts from step 0"));

  e = Describe(2, 9, false);
  EXPECT_EQ(e.exit_code, job::kStoppedUnsavedExitCode);
  EXPECT_EQ(e.exit_code, 80);
  EXPECT_THAT(e.message, HasSubstr("at step 9: no checkpoint written because checkpoint.dir is "
                                   "not set; steps 3-9 are lost"));
}

TEST(TrainStopDeathTest, AStopDuringStartUpEndsAt79WithOneLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::atomic<bool> stop{false};
        StartupStopWatch watch(&stop, "deepnet train: rank 1: ");
        watch.SetPhase("waiting at the rendezvous");
        stop.store(true);
        std::this_thread::sleep_for(std::chrono::seconds(30));
      },
      ::testing::ExitedWithCode(79),
      "deepnet train: rank 1: stopped by a stop request during start-up \\(waiting at the "
      "rendezvous\\): nothing was trained, so no checkpoint was written \\(none needed\\); exit "
      "79");
}

TEST(TrainStopTest, ADisarmedWatchNeverEndsTheProcess) {
  std::atomic<bool> stop{false};
  StartupStopWatch watch(&stop, "");
  watch.Disarm();
  stop.store(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  SUCCEED();  // Still here.
}

// A run resumed from step 3 and stopped before its first step writes nothing: `latest` stays.
TEST(TrainStopTest, AResumedRunStoppedBeforeItsFirstStepKeepsItsCheckpoint) {
  TempDir dir;
  std::ofstream(dir / "job.yaml")
      << "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn_dim: 32, "
         "dropout: 0.0, max_positions: 128}\n"
         "data: {synthetic: {languages: [cp], pairs_per_language: 50}, max_len: 64}\n"
         "train: {max_steps: 3, log_every: 1, probe_every: 0}\n"
      << "checkpoint: {dir: " << (dir / "ckpt") << ", every_steps: 0}\n";
  auto config = job::LoadJobConfig(dir / "job.yaml", {});
  ASSERT_TRUE(config.ok()) << config.status();
  {
    auto trainer = train::Trainer::Create(*config, train::TrainerIo{});
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    auto summary = (*trainer)->Run();
    ASSERT_TRUE(summary.ok()) << summary.status();
  }
  const std::string latest = testing::ReadText(dir / "ckpt/latest");
  ASSERT_FALSE(latest.empty());
  config->train.max_steps = 10;
  std::atomic<bool> stop{true};
  train::TrainerIo io;
  io.stop = &stop;
  auto trainer = train::Trainer::Create(*config, io);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto summary = (*trainer)->Run();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->start_step, 3);
  EXPECT_EQ(summary->final_step, 3);
  EXPECT_TRUE(summary->last_checkpoint.empty());
  const StopEnding ending =
      DescribeSignalStop(summary->start_step, summary->final_step, summary->last_checkpoint, true);
  EXPECT_EQ(ending.exit_code, 143);
  EXPECT_THAT(ending.message, HasSubstr("the checkpoint of step 3 it resumed from, unchanged"));
  EXPECT_EQ(testing::ReadText(dir / "ckpt/latest"), latest);
}

}  // namespace
}  // namespace deepnet::cli
