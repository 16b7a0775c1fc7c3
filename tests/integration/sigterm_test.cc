// Slurm preemption / Kubernetes eviction: SIGTERM makes `deepnet train` finish its step, write a
// checkpoint and exit 143; the next run resumes from it. A SIGTERM during start-up (a rank
// waiting at the rendezvous for a peer that never comes) ends at once with exit 79 and says no
// checkpoint was needed; one after training without checkpoint.dir exits 80 and says the steps
// are lost (job/stop_exit.h). Spawns the real binary.
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
  EXPECT_NE(out.find("deepnet train: stopped by SIGTERM at step "), std::string::npos) << out;
  EXPECT_NE(out.find(": checkpoint written ("), std::string::npos) << out;
  ASSERT_TRUE(std::filesystem::exists(dir / "ckpt/latest")) << out;

  // The next run resumes where the interrupted one stopped.
  Child resumed({DEEPNET_BINARY, "train", "--config", dir / "job.yaml", "--set",
                 "train.max_steps=1"},
                dir / "resume.log");
  EXPECT_EQ(resumed.Wait(std::chrono::seconds(60)), 0);
  EXPECT_NE(Slurp(dir / "resume.log").find("[resume] resumed from step"), std::string::npos)
      << Slurp(dir / "resume.log");
}

// Waits until `log` shows a training step, then sends SIGTERM.
void TermAfterTraining(const Child& child, const std::string& log) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (Slurp(log).find("[train] step 3/") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << Slurp(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(kill(child.pid(), SIGTERM), 0);
}

TEST(SigtermTest, WithoutACheckpointDirExits80AndSaysTheStepsAreLost) {
  TempDir dir;
  std::ofstream(dir / "job.yaml")
      << "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn_dim: 32, "
         "max_positions: 128}\n"
         "data: {synthetic: {languages: [cp], pairs_per_language: 200}, max_len: 64}\n"
         "train: {max_steps: 1000000, log_every: 1, probe_every: 0}\n";
  const std::string log = dir / "train.log";
  Child child({DEEPNET_BINARY, "train", "--config", dir / "job.yaml"}, log);
  TermAfterTraining(child, log);
  EXPECT_EQ(child.Wait(std::chrono::seconds(60)), 80) << Slurp(log);
  EXPECT_NE(Slurp(log).find("no checkpoint written because checkpoint.dir is not set; steps 1-"),
            std::string::npos)
      << Slurp(log);
}

TEST(SigtermTest, DuringStartUpAtTheRendezvousExits79AtOnceWithoutACheckpoint) {
#ifndef DEEPNET_HAVE_GLOO
  GTEST_SKIP() << "LibTorch here has no Gloo: no two-rank rendezvous to wait at";
#endif
  TempDir dir;
  const std::string rendezvous = dir / "rendezvous";
  // Two ranks, one started: rank 0 waits at the rendezvous (timeout 600 s) for rank 1.
  std::ofstream(dir / "job.yaml")
      << "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn_dim: 32, "
         "max_positions: 128}\n"
         "data: {synthetic: {languages: [cp], pairs_per_language: 200}, max_len: 64}\n"
         "train: {max_steps: 10, log_every: 1, probe_every: 0}\n"
      << "checkpoint: {dir: " << (dir / "ckpt") << ", every_steps: 0}\n"
      << "parallel: {pipeline_stages: 2, data_parallel: 1, backend: gloo, timeout_s: 600, "
         "rendezvous: \"file://"
      << rendezvous << "\"}\n";
  const std::string log = dir / "train.log";
  Child child(
      {DEEPNET_BINARY, "train", "--config", dir / "job.yaml"}, log,
      {"DEEPNET_RANK=0", "DEEPNET_WORLD_SIZE=2", "DEEPNET_LOCAL_RANK=0", "DEEPNET_LOCAL_SIZE=2"});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(rendezvous)) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << Slurp(log);
    ASSERT_EQ(child.Wait(std::chrono::seconds(0)), -1000) << Slurp(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kill(child.pid(), SIGTERM), 0);
  // Ends within seconds, not at the rendezvous timeout.
  EXPECT_EQ(child.Wait(std::chrono::seconds(30)), 79) << Slurp(log);
  const std::string out = Slurp(log);
  EXPECT_NE(out.find("deepnet train: rank 0: stopped by SIGTERM during start-up (waiting at the "
                     "rendezvous for the other 1 rank(s)): nothing was trained, so no checkpoint "
                     "was written (none needed); exit 79"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "ckpt/latest"));
}

}  // namespace
