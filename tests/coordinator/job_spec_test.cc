#include "coordinator/core/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

JobSpecCheckOptions NoPathChecks() {
  JobSpecCheckOptions options;
  options.check_paths = false;
  return options;
}
const JobSpecCheckOptions kNoPathChecks = NoPathChecks();

// The message of a spec that must be rejected with INVALID_ARGUMENT.
std::string SpecError(const std::string& yaml, JobSpecCheckOptions options = kNoPathChecks) {
  absl::StatusOr<JobSpecInfo> info = ParseJobSpec(yaml, options);
  EXPECT_FALSE(info.ok()) << "accepted unexpectedly:\n" << yaml;
  if (info.ok()) return "";
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(info.status().message());
}

JobSpecInfo SpecOk(const std::string& yaml, JobSpecCheckOptions options = kNoPathChecks) {
  absl::StatusOr<JobSpecInfo> info = ParseJobSpec(yaml, options);
  EXPECT_TRUE(info.ok()) << info.status() << "\n" << yaml;
  return info.ok() ? *info : JobSpecInfo();
}

int CountLines(const std::string& text) {
  return text.empty() ? 0 : 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

void WriteSpecFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

TEST(JobSpecTest, EmptySpecGivesTheTrainerDefaults) {
  const JobSpecInfo info = SpecOk("");
  EXPECT_EQ(info.name, "deepnet");
  EXPECT_EQ(info.pipeline_stages, 1);
  EXPECT_EQ(info.data_parallel, 1);
  EXPECT_FALSE(info.cuda);
  EXPECT_EQ(info.priority, 0);
  EXPECT_EQ(info.max_restarts, 2);
  EXPECT_EQ(info.hang_timeout_s, 0.0);
  EXPECT_EQ(info.start_timeout_s, 300.0);
  EXPECT_EQ(info.max_steps, 1000);
  EXPECT_EQ(info.checkpoint_dir, "");
  EXPECT_EQ(info.checkpoint_every_steps, 500);
  EXPECT_TRUE(info.labels.empty());
  // Paths are only checked when a data source or checkpoints use them.
  EXPECT_EQ(SpecOk("", JobSpecCheckOptions{}).name, "deepnet");
}

TEST(JobSpecTest, ReadsEveryFieldTheCoordinatorNeeds) {
  testing::TempDir dir;
  WriteSpecFile(dir / "train.tsv", "a\tb\n");
  WriteSpecFile(dir / "valid.tsv", "c\td\n");
  const JobSpecInfo info = SpecOk(R"yaml(
name: wmt-deep
model: {encoder_layers: 4, decoder_layers: 4}
data: {source: tsv, train_path: )yaml" + (dir / "train.tsv") + R"yaml(,
       valid_path: )yaml" + (dir / "valid.tsv") + R"yaml(}
train: {max_steps: 20000}
checkpoint: {dir: )yaml" + (dir / "ckpt") + R"yaml(, every_steps: 250}
runtime: {device: cuda}
parallel: {pipeline_stages: 4, data_parallel: 2, backend: nccl}
scheduling:
  priority: -7
  max_restarts: 0
  hang_timeout_s: 600
  start_timeout_s: 45.5
  labels: {team: mt, exp.id: run-3}
)yaml", JobSpecCheckOptions{});
  EXPECT_EQ(info.name, "wmt-deep");
  EXPECT_EQ(info.pipeline_stages, 4);
  EXPECT_EQ(info.data_parallel, 2);
  EXPECT_TRUE(info.cuda);
  EXPECT_EQ(info.priority, -7);
  EXPECT_EQ(info.max_restarts, 0);
  EXPECT_EQ(info.hang_timeout_s, 600.0);
  EXPECT_EQ(info.start_timeout_s, 45.5);
  EXPECT_EQ(info.max_steps, 20000);
  EXPECT_EQ(info.checkpoint_dir, dir / "ckpt");
  EXPECT_EQ(info.checkpoint_every_steps, 250);
  EXPECT_EQ(info.labels, (std::map<std::string, std::string>{{"team", "mt"}, {"exp.id", "run-3"}}));
}

TEST(JobSpecTest, TrainerSchemaErrorsAreReportedWithTheFieldPath) {
  EXPECT_EQ(SpecError("model:\n  heads: 0\n"), "job spec: model.heads: must be > 0 (got 0)");
  EXPECT_THAT(SpecError("model:\n  nrom: deepnorm\n"),
              HasSubstr("job spec: model.nrom: unknown key (allowed: encoder_layers, "));
  EXPECT_EQ(SpecError("train:\n  max_steps: ten\n"),
            "job spec: train.max_steps: expected an integer (got 'ten')");
  EXPECT_THAT(SpecError("name: x\n  bad: [\n"), HasSubstr("job spec: YAML syntax error at line"));
  EXPECT_EQ(SpecError("model: {encoder_layers: 2, decoder_layers: 1}\n"
                      "parallel: {pipeline_stages: 4}\n"),
            "job spec: parallel.pipeline_stages: must be <= the model's 3 layers (got 4)");
  EXPECT_EQ(SpecError("parallel: {backend: nccl}\n"),
            "job spec: parallel.backend: nccl moves CUDA tensors: set runtime.device to cuda");
}

TEST(JobSpecTest, SchedulingSectionIsChecked) {
  EXPECT_EQ(SpecError("scheduling:\n  foo: 1\n"),
            "job spec: scheduling.foo: unknown key (allowed: priority, max_restarts, "
            "hang_timeout_s, start_timeout_s, labels, team)");
  EXPECT_EQ(SpecError("scheduling:\n  priority: 2147483648\n"),
            "job spec: scheduling.priority: must be <= 2147483647 (got 2147483648)");
  EXPECT_EQ(SpecError("scheduling:\n  priority: -2147483649\n"),
            "job spec: scheduling.priority: must be >= -2147483648 (got -2147483649)");
  EXPECT_EQ(SpecOk("scheduling:\n  priority: -2147483648\n").priority, -2147483647 - 1);
  EXPECT_EQ(SpecError("scheduling:\n  max_restarts: -1\n"),
            "job spec: scheduling.max_restarts: must be >= 0 (got -1)");
  EXPECT_EQ(SpecError("scheduling:\n  hang_timeout_s: -0.5\n"),
            "job spec: scheduling.hang_timeout_s: must be in [0, 2592000] s (at most 30 days; "
            "got -0.5)");
  EXPECT_EQ(SpecError("scheduling:\n  start_timeout_s: 0\n"),
            "job spec: scheduling.start_timeout_s: must be in (0, 2592000] s (at most 30 days; "
            "got 0)");
  EXPECT_EQ(SpecError("scheduling:\n  start_timeout_s: 1e12\n"),
            "job spec: scheduling.start_timeout_s: must be in (0, 2592000] s (at most 30 days; "
            "got 1e+12)");
  EXPECT_EQ(SpecError("scheduling:\n  labels: {Team: mt}\n"),
            "job spec: scheduling.labels: key 'Team' must match [a-z0-9_.-]{1,63}");
  EXPECT_EQ(SpecError("scheduling:\n  labels: {team: " + std::string(257, 'v') + "}\n"),
            "job spec: scheduling.labels.team: must be at most 256 characters (got 257)");
  EXPECT_EQ(SpecError("scheduling:\n  labels: [team]\n"),
            "job spec: scheduling.labels: expected a map of strings (got a list)");
}

TEST(JobSpecTest, RendezvousIsTheCoordinators) {
  EXPECT_EQ(SpecError("parallel:\n  rendezvous: tcp://node0:29500\n"),
            "job spec: parallel.rendezvous: must be unset: the coordinator provides the "
            "rendezvous (got 'tcp://node0:29500')");
  // A value the trainer's schema rejects already is reported once.
  const std::string error = SpecError("parallel:\n  rendezvous: http://x\n");
  EXPECT_THAT(error, HasSubstr("job spec: parallel.rendezvous: must start with tcp://, file:// or grpc://"));
  EXPECT_EQ(CountLines(error), 1) << error;
  EXPECT_EQ(SpecOk("parallel:\n  rendezvous: ''\n").pipeline_stages, 1);
}

TEST(JobSpecTest, DeviceIsCpuOrCudaWithoutAnIndex) {
  EXPECT_FALSE(SpecOk("runtime:\n  device: cpu\n").cuda);
  EXPECT_TRUE(SpecOk("runtime:\n  device: cuda\n").cuda);
  EXPECT_EQ(SpecError("runtime:\n  device: cuda:1\n"),
            "job spec: runtime.device: must be cpu or cuda: the worker picks the GPU (got "
            "'cuda:1')");
  const std::string error = SpecError("runtime:\n  device: gpu\n");
  EXPECT_THAT(error, HasSubstr("job spec: runtime.device: must be cpu, cuda or cuda:N"));
  EXPECT_EQ(CountLines(error), 1) << error;
}

TEST(JobSpecTest, DataPathsMustBeAbsoluteAndExist) {
  testing::TempDir dir;
  WriteSpecFile(dir / "train.tsv", "a\tb\n");
  std::filesystem::create_directory(dir / "shards");
  const JobSpecCheckOptions check;
  const std::string tsv = "data:\n  source: tsv\n  train_path: ";
  EXPECT_EQ(SpecOk(tsv + dir / "train.tsv" + "\n", check).name, "deepnet");
  EXPECT_EQ(SpecError(tsv + "corpora/train.tsv\n", check),
            "job spec: data.train_path: must be an absolute path on the shared storage (got "
            "'corpora/train.tsv')");
  EXPECT_EQ(SpecError(tsv + dir / "missing.tsv" + "\n", check),
            "job spec: data.train_path: does not exist (got '" + dir / "missing.tsv" + "')");
  EXPECT_EQ(SpecError(tsv + dir.path() + "\n", check),
            "job spec: data.train_path: is a directory, expected a file (got '" + dir.path() +
                "')");
  EXPECT_EQ(SpecError(tsv + dir / "train.tsv" + "\n  valid_path: valid.tsv\n", check),
            "job spec: data.valid_path: must be an absolute path on the shared storage (got "
            "'valid.tsv')");
  EXPECT_EQ(SpecError(tsv + dir / "train.tsv" + "\n  valid_path: " + dir / "v.tsv" + "\n", check),
            "job spec: data.valid_path: does not exist (got '" + dir / "v.tsv" + "')");

  const std::string shards = "data:\n  source: shards\n  shard_dir: ";
  EXPECT_EQ(SpecOk(shards + dir / "shards" + "\n", check).name, "deepnet");
  EXPECT_EQ(SpecError(shards + "shards\n", check),
            "job spec: data.shard_dir: must be an absolute path on the shared storage (got "
            "'shards')");
  EXPECT_EQ(SpecError(shards + dir / "none" + "\n", check),
            "job spec: data.shard_dir: does not exist (got '" + dir / "none" + "')");
  EXPECT_EQ(SpecError(shards + dir / "train.tsv" + "\n", check),
            "job spec: data.shard_dir: is not a directory (got '" + dir / "train.tsv" + "')");

  // Paths the data source does not use are not checked.
  EXPECT_EQ(SpecOk("data:\n  train_path: rel.tsv\n  shard_dir: rel\n", check).name, "deepnet");
  EXPECT_EQ(SpecOk("data:\n  source: tsv\n  train_path: rel.tsv\n  shard_dir: rel\n").name,
            "deepnet");
}

TEST(JobSpecTest, CheckpointDirMustBeAbsoluteWithAnExistingParent) {
  testing::TempDir dir;
  WriteSpecFile(dir / "file", "x");
  const JobSpecCheckOptions check;
  const std::string ckpt = "checkpoint:\n  dir: ";
  EXPECT_EQ(SpecOk(ckpt + dir / "new" + "\n", check).checkpoint_dir, dir / "new");
  EXPECT_EQ(SpecOk(ckpt + dir / "new/" + "\n", check).checkpoint_dir, dir / "new/");
  EXPECT_EQ(SpecOk(ckpt + dir.path() + "\n", check).checkpoint_dir, dir.path());
  EXPECT_EQ(SpecError(ckpt + "runs/x\n", check),
            "job spec: checkpoint.dir: must be an absolute path on the shared storage (got "
            "'runs/x')");
  EXPECT_EQ(SpecError(ckpt + dir / "a/b" + "\n", check),
            "job spec: checkpoint.dir: parent directory " + dir / "a" +
                " does not exist (got '" + dir / "a/b" + "')");
  EXPECT_EQ(SpecError(ckpt + dir / "a/b/" + "\n", check),
            "job spec: checkpoint.dir: parent directory " + dir / "a" +
                " does not exist (got '" + dir / "a/b/" + "')");
  EXPECT_EQ(SpecError(ckpt + dir / "file" + "\n", check),
            "job spec: checkpoint.dir: exists and is not a directory (got '" + dir / "file" +
                "')");
  EXPECT_EQ(SpecError(ckpt + dir / "file/ckpt" + "\n", check),
            "job spec: checkpoint.dir: parent " + dir / "file" + " is not a directory (got '" +
                dir / "file/ckpt" + "')");
  // Without path checks a relative folder is the worker's business.
  EXPECT_EQ(SpecOk(ckpt + "runs/x\n").checkpoint_dir, "runs/x");
}

TEST(JobSpecTest, ReportsEveryProblemAtOnce) {
  const std::string error = SpecError(R"yaml(
model:
  heads: 0
data:
  source: tsv
  train_path: train.tsv
checkpoint:
  dir: runs/x
runtime:
  device: cuda:0
parallel:
  rendezvous: tcp://h:1
scheduling:
  foo: 1
  max_restarts: -1
)yaml", JobSpecCheckOptions{});
  EXPECT_THAT(error,
              AllOf(HasSubstr("job spec: model.heads: must be > 0 (got 0)"),
                    HasSubstr("job spec: scheduling.foo: unknown key"),
                    HasSubstr("job spec: scheduling.max_restarts: must be >= 0 (got -1)"),
                    HasSubstr("job spec: parallel.rendezvous: must be unset"),
                    HasSubstr("job spec: runtime.device: must be cpu or cuda"),
                    HasSubstr("job spec: data.train_path: must be an absolute path"),
                    HasSubstr("job spec: checkpoint.dir: must be an absolute path")));
  EXPECT_EQ(CountLines(error), 7) << error;
  EXPECT_THAT(error, Not(HasSubstr("<config>")));
}

}  // namespace
}  // namespace deepnet::coordinator
