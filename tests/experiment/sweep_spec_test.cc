#include "experiment/sweep_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "experiment/presets.h"
#include "experiment/run_plan.h"
#include "tests/temp_dir.h"

namespace deepnet::experiment {
namespace {

using ::testing::HasSubstr;

constexpr const char* kSpec = R"(
name: tiny
job:
  model: {d_model: 16, heads: 2, ffn_dim: 32}
  train: {max_steps: 3}
set: [train.log_every=1]
axes:
  model.norm: [post_ln, deepnorm]
  depth: [1, 2]
  train.seed: [1, 2, 3]
budget: {minutes: 5, max_runs: 4}
plateau: {fraction: 0.6}
out: somewhere
)";

TEST(SweepSpecTest, ParsesEveryField) {
  auto spec = ParseSweepSpec(kSpec, "spec.yaml", "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "tiny");
  ASSERT_EQ(spec->axes.size(), 3u);
  EXPECT_EQ(spec->axes[0].key, "model.norm");  // Order of the file.
  EXPECT_EQ(spec->axes[1].key, "depth");
  EXPECT_EQ(spec->axes[2].values, (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_EQ(spec->set, std::vector<std::string>{"train.log_every=1"});
  EXPECT_EQ(spec->budget.minutes, 5);
  EXPECT_EQ(spec->budget.max_runs, 4);
  EXPECT_EQ(spec->plateau.fraction, 0.6);
  EXPECT_EQ(spec->out, "somewhere");
  EXPECT_THAT(spec->job_yaml, HasSubstr("d_model"));
}

TEST(SweepSpecTest, ErrorsNameTheField) {
  auto expect_error = [](const std::string& text, const std::string& what) {
    auto spec = ParseSweepSpec(text, "s.yaml", "");
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(what)) << text;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr("s.yaml")) << text;
  };
  expect_error("job: {}\naxes: {depth: [0]}", "axes.depth[0]: depth is a layer count >= 1");
  expect_error("job: {}\naxes: {depth: []}", "axes.depth: expected a non-empty list");
  expect_error("job: {}\naxes: {norm: [a]}", "axes.norm: an axis is `depth` or a dotted");
  expect_error("job: {}\naxes: {model.norm: [a, a]}", "axes.model.norm[1]: duplicate value");
  expect_error("job: {}\nbudget: {minutes: -1}", "budget.minutes: must be in [0,");
  expect_error("job: {}\nbudget: {max_run: 1}", "budget.max_run: unknown key");
  expect_error("job: {}\nplateau: {fraction: 2}", "plateau.fraction: must be in (0, 1]");
  expect_error("axes: {depth: [1]}", "base: missing");
  expect_error("base: nothere.yaml", "job file nothere.yaml: no such file");
  expect_error("base: a.yaml\njob: {}", "job: give either `base`");
  expect_error("job: {}\nset: [train.max_steps]", "set[0]: expected dotted.key=value");
  expect_error("job: {}\nwhatever: 1", "whatever: unknown key");
  expect_error("job: {}\naxes: {depth: [2], model.encoder_layers: [3]}", "axes.depth: sets");
  expect_error("[1, 2]", "expected a map");
  expect_error("job: {\n", "YAML syntax error");
}

TEST(SweepSpecTest, BaseJobIsRelativeToTheSpec) {
  testing::TempDir dir;
  std::ofstream(dir / "job.yaml") << "train: {max_steps: 7}\n";
  std::ofstream(dir / "spec.yaml") << "base: job.yaml\naxes: {depth: [1]}\n";
  auto spec = LoadSweepSpec(dir / "spec.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->job_yaml, HasSubstr("max_steps: 7"));
  auto missing = LoadSweepSpec(dir / "nope.yaml");
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("sweep spec"));
}

TEST(SweepSpecTest, CommandLineOverrides) {
  auto spec = ParseSweepSpec(kSpec, "spec.yaml", "");
  ASSERT_TRUE(spec.ok());
  const absl::Status applied =
      ApplySpecOverrides({"axes.depth=[6, 18]", "axes.optim.lr=1e-3", "budget.max_runs=0",
                          "budget.minutes=2.5", "train.max_steps=9", "out=x"},
                         &*spec);
  ASSERT_TRUE(applied.ok()) << applied.message();
  EXPECT_EQ(spec->axes[1].values, (std::vector<std::string>{"6", "18"}));
  ASSERT_EQ(spec->axes.size(), 4u);
  EXPECT_EQ(spec->axes[3].key, "optim.lr");
  EXPECT_EQ(spec->budget.max_runs, 0);
  EXPECT_EQ(spec->budget.minutes, 2.5);
  EXPECT_EQ(spec->set.back(), "train.max_steps=9");
  EXPECT_EQ(spec->out, "x");
  auto bad = ApplySpecOverrides({"budget.minute=3"}, &*spec);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("budget.minute: unknown key"));
  bad = ApplySpecOverrides({"axes.depth=[x]"}, &*spec);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("axes.depth[0]"));
  bad = ApplySpecOverrides({"novalue"}, &*spec);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("expected key=value"));
}

TEST(SweepSpecTest, DumpParsesBack) {
  auto spec = ParseSweepSpec(kSpec, "spec.yaml", "");
  ASSERT_TRUE(spec.ok());
  auto again = ParseSweepSpec(DumpSweepSpec(*spec), "dump", "");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << DumpSweepSpec(*spec);
  EXPECT_EQ(again->axes.size(), spec->axes.size());
  EXPECT_EQ(again->budget.max_runs, 4);
}

TEST(SweepSpecTest, PresetsParseAndExpand) {
  ASSERT_GE(Presets().size(), 2u);
  for (const std::string name : {"update-norm", "depth-sweep"}) {
    auto yaml = PresetYaml(name);
    ASSERT_TRUE(yaml) << name;
    auto spec = ParseSweepSpec(*yaml, name, "");
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto plan = ExpandPlan(*spec);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->size(), name == std::string("update-norm") ? 8u : 16u);
    EXPECT_GT(spec->budget.minutes, 0);
  }
  EXPECT_FALSE(PresetYaml("nope"));
}

}  // namespace
}  // namespace deepnet::experiment
