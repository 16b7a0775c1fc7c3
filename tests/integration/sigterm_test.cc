// Slurm preemption / Kubernetes eviction: SIGTERM makes `deepnet train` finish its step, write a
// checkpoint and exit 143; the next run resumes from it. Spawns the real binary.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/integration/child_process.h"
#include "tests/temp_dir.h"

namespace {

using deepnet::testing::TempDir;

using deepnet::testing::Child;
using deepnet::testing::Slurp;

TEST(SigtermTest, CheckpointsExits143AndResumes) {
  TempDir dir;
  std::ofstream(dir / "job.yaml")
      << "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn_dim: 32, "
         "max_positions: 128}\n"
         "data: {synthetic: {languages: [cp], pairs_per_language: 200}, max_len: 64}\n"
         "train: {max_steps: 1000000, log_every: 1, probe_every: 0}\n"
      << "checkpoint: {dir: " << (dir / "ckpt") << ", every_steps: 0}\n";
  const std::string log = dir / "train.log";
  Child child({DEEPNET_BINARY, "train", "--config", dir / "job.yaml"}, log);
  // Wait until training is under way, then ask it to stop.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (Slurp(log).find("[train] step 3/") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << Slurp(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(kill(child.pid(), SIGTERM), 0);
  EXPECT_EQ(child.Wait(std::chrono::seconds(60)), 143) << Slurp(log);
  const std::string out = Slurp(log);
  EXPECT_NE(out.find("(signal)"), std::string::npos) << out;
  ASSERT_TRUE(std::filesystem::exists(dir / "ckpt/latest")) << out;

  // The next run resumes where the interrupted one stopped.
  Child resumed({DEEPNET_BINARY, "train", "--config", dir / "job.yaml", "--set",
                 "train.max_steps=1"},
                dir / "resume.log");
  EXPECT_EQ(resumed.Wait(std::chrono::seconds(60)), 0);
  EXPECT_NE(Slurp(dir / "resume.log").find("[resume] resumed from step"), std::string::npos)
      << Slurp(dir / "resume.log");
}

}  // namespace
