// Job specs built to hurt the reader: huge error lists, alias bombs, deep nesting, NUL bytes and
// control characters, numbers at and past every cap (issue 13, "Validation that cannot crash
// anything").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "job/job_config.h"
#include "job/yaml_limits.h"
#include "job/yaml_reader.h"

namespace deepnet::job {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string LimitsParseError(const std::string& yaml) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(yaml, {}, "spec");
  EXPECT_FALSE(config.ok()) << "parsed unexpectedly:\n" << yaml.substr(0, 500);
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

// `levels` nested lists of ten aliases of the previous level: 10^levels strings when expanded.
std::string AliasBomb(int levels) {
  std::string text = "model:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i <= levels; ++i) {
    absl::StrAppend(&text, "  l", i, ": &l", i, " [");
    for (int k = 0; k < 10; ++k) absl::StrAppend(&text, k ? ", " : "", "*l", i - 1);
    absl::StrAppend(&text, "]\n");
  }
  return text;
}

TEST(SpecLimitsTest, ManyProblemsGiveAShortError) {
  std::string yaml;
  for (int i = 0; i < 5000; ++i) absl::StrAppend(&yaml, "k", i, ": 1\n");
  const std::string error = LimitsParseError(yaml);
  EXPECT_LT(error.size(), ConfigProblems::kMaxBytes + 200);
  EXPECT_THAT(error, StartsWith("spec: k0: unknown key (allowed: name, model,"));
  EXPECT_THAT(error, HasSubstr("more problems"));
  // The count names every problem not listed.
  const size_t listed = std::count(error.begin(), error.end(), '\n');
  EXPECT_THAT(error, HasSubstr(absl::StrCat("... and ", 5000 - listed, " more problems")));
}

TEST(SpecLimitsTest, SixtyThousandUnknownKeysHitTheNodeLimit) {
  std::string yaml;
  for (int i = 0; i < 60000; ++i) absl::StrAppend(&yaml, "key_number_", i, ": 1\n");
  const std::string error = LimitsParseError(yaml);
  EXPECT_LT(error.size(), 200u) << error;
  EXPECT_THAT(error, HasSubstr("more than 20000 nodes"));
}

TEST(SpecLimitsTest, LongKeysAndValuesAreShortenedInTheError) {
  const std::string key(100000, 'k');
  // An explicit key ("? ..."): yaml-cpp refuses implicit keys longer than 1024 characters.
  const std::string error =
      LimitsParseError("? " + key + "\n: 1\nname: " + std::string(100000, 'n') + "\n");
  EXPECT_LT(error.size(), 2 * ConfigProblems::kMaxLineBytes + 20);
  EXPECT_THAT(error, HasSubstr("kkk..."));
  EXPECT_THAT(error, HasSubstr("name: must be at most 4096 bytes (got 100000)"));
}

TEST(SpecLimitsTest, AliasBombIsRefusedBeforeLoading) {
  EXPECT_THAT(LimitsParseError(AliasBomb(9)),
              AllOf(StartsWith("spec: YAML too large: more than 20000 nodes (aliases counted "
                               "expanded) at line "),
                    Not(HasSubstr("\n"))));
  // Three levels (1,111 nodes expanded) are within the limit: the keys are reported as usual.
  EXPECT_THAT(LimitsParseError(AliasBomb(3)), HasSubstr("spec: model.l0: unknown key"));
  EXPECT_THAT(CheckYamlLimits("a: &a [1, *a]\n").message(), HasSubstr("recursive"));
}

TEST(SpecLimitsTest, DeepNestingIsRefusedBeforeLoading) {
  for (const char* open_close : {"[]", "{}"}) {
    std::string deep = "name: ";
    for (int i = 0; i < 100000; ++i) deep += open_close[0] == '[' ? "[" : "{a: ";
    for (int i = 0; i < 100000; ++i) deep += open_close[1];
    EXPECT_THAT(LimitsParseError(deep + "\n"),
                HasSubstr("YAML nested too deeply: more than 32 levels of lists and maps"));
  }
  // Brackets inside plain or quoted scalars are text, not nesting.
  const std::string brackets(250, '[');
  EXPECT_TRUE(ParseJobConfig("name: a" + brackets + "\n", {}, "spec").ok());
  EXPECT_TRUE(
      ParseJobConfig("data: {src_lang: '" + brackets + brackets + "'} # [[[[\n", {}, "spec").ok());
  std::string block;
  for (int i = 0; i < 40; ++i) absl::StrAppend(&block, std::string(2 * i, ' '), "k", i, ":\n");
  EXPECT_THAT(LimitsParseError(block), HasSubstr("nested too deeply"));
}

TEST(SpecLimitsTest, OverrideValuesHaveTheSameLimits) {
  absl::StatusOr<JobConfig> config =
      ParseJobConfig("", {"name=" + std::string(100, '[') + std::string(100, ']')}, "spec");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("override 'name=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["));
  EXPECT_THAT(config.status().message(), HasSubstr("YAML nested too deeply"));
}

TEST(SpecLimitsTest, ManyAnchorsAreRefused) {
  std::string yaml = "name: x\nunused:\n";
  for (int i = 0; i < 1001; ++i) absl::StrAppend(&yaml, "  - &a", i, " 1\n");
  EXPECT_THAT(LimitsParseError(yaml), HasSubstr("more than 1000 anchors"));
}

TEST(SpecLimitsTest, NulAndControlCharactersInStringsNameTheField) {
  struct Case {
    std::string yaml;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"name: \"a\\0b\"\n", "name"},
      {"checkpoint: {dir: \"/runs/a\\0/../b\"}\n", "checkpoint.dir"},
      {"data: {source: tsv, train_path: \"/d/t\\x01.tsv\"}\n", "data.train_path"},
      {"data: {valid_path: \"/d/v\\n.tsv\"}\n", "data.valid_path"},
      {"data: {shard_dir: \"/d\\x7f\"}\n", "data.shard_dir"},
      {"scheduling: {labels: {team: \"a\\tb\"}}\n", "scheduling.labels.team"},
      {"data: {synthetic: {languages: [\"rev\\0\"]}}\n", "data.synthetic.languages[0]"},
      {"runtime: {device: \"cpu\\0\"}\n", "runtime.device"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    const std::string error = LimitsParseError(c.yaml);
    EXPECT_THAT(error, HasSubstr(c.field + ": must not contain control characters (\\x"));
    // The error itself carries no control character but its line breaks.
    for (char ch : error) EXPECT_TRUE(ch == '\n' || static_cast<unsigned char>(ch) >= 0x20);
  }
  // A NUL in a key is shown escaped.
  EXPECT_THAT(LimitsParseError("\"na\\0me\": x\n"), HasSubstr("spec: na\\x00me: unknown key"));
}

TEST(SpecLimitsTest, InvalidUtf8InStringsIsRefused) {
  EXPECT_THAT(LimitsParseError("name: \"a\xff\"\n"), HasSubstr("name: must be valid UTF-8"));
  EXPECT_EQ(ShortenForMessage("\xC3\xA9\xC3\xA9", 3), "\xC3\xA9...");
  EXPECT_EQ(ShortenForMessage("a\xff", 10), "a\\xff");
}

TEST(SpecLimitsTest, ExtremeNumbersAreRefusedWithTheirRange) {
  const std::vector<std::string> extremes = {
      "1e12", "1e308", "-1", "inf", ".nan", "nan", "9223372036854775808", "-9223372036854775809",
      "1e400"};
  const std::vector<std::string> int_fields = {
      "model: {encoder_layers: %}", "model: {d_model: %}",        "model: {ffn_dim: %}",
      "model: {vocab_size: %}",     "model: {heads: %}",          "model: {max_positions: %}",
      "data: {max_tokens: %}",      "data: {max_sentences: %}",   "data: {prefetch: %}",
      "train: {max_steps: %}",      "optim: {accum_steps: %}",    "parallel: {micro_batches: %}",
      "checkpoint: {keep_last: %}", "runtime: {blas_threads: %}", "scheduling: {max_restarts: %}",
      "train: {probe_sentences: %}"};
  const std::vector<std::string> real_fields = {"optim: {lr: %}",
                                                "train: {max_minutes: %}",
                                                "parallel: {bucket_mb: %}",
                                                "data: {temperature: %}",
                                                "scheduling: {hang_timeout_s: %}",
                                                "parallel: {timeout_s: %}",
                                                "model: {dropout: %}",
                                                "optim: {clip_norm: %}"};
  for (const std::vector<std::string>* fields : {&int_fields, &real_fields}) {
    for (const std::string& field : *fields) {
      for (const std::string& value : extremes) {
        std::string yaml = field;
        yaml.replace(yaml.find('%'), 1, value);
        SCOPED_TRACE(yaml);
        const std::string error = LimitsParseError(yaml + "\n");
        // One line naming the field, whatever the value.
        const std::string key = field.substr(
            field.find('{') + 1, field.find(':', field.find('{')) - field.find('{') - 1);
        EXPECT_THAT(error, HasSubstr(key));
      }
    }
  }
}

TEST(SpecLimitsTest, CapsAreInclusive) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      "model: {encoder_layers: 2000, decoder_layers: 2000, d_model: 65536, heads: 1024,\n"
      "        ffn_dim: 262144, vocab_size: 4194304, max_positions: 1048576}\n"
      "data: {max_tokens: 16777216, max_sentences: 1048576, max_len: 1048576, prefetch: 1024}\n"
      "optim: {accum_steps: 65536}\n"
      "train: {max_steps: 1000000000000, max_minutes: 525600}\n"
      "parallel: {micro_batches: 65536, pipeline_stages: 16, data_parallel: 4096}\n"
      "scheduling: {max_restarts: 1000}\n",
      {}, "spec");
  EXPECT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(LimitsParseError("model: {d_model: 65537}\n"),
              HasSubstr("model.d_model: must be <= 65536 (got 65537)"));
  EXPECT_THAT(LimitsParseError("data: {temperature: 0.001}\n"),
              HasSubstr("data.temperature: must be in [0.01, 1000] (got 0.001)"));
  std::string labels = "scheduling:\n  labels:\n";
  for (int i = 0; i < 65; ++i) absl::StrAppend(&labels, "    l", i, ": v\n");
  EXPECT_THAT(LimitsParseError(labels), HasSubstr("scheduling.labels: at most 64 labels (got 65)"));
}

}  // namespace
}  // namespace deepnet::job
