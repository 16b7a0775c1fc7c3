// Replays the job-spec fuzzer's seed corpus and every crasher it ever found
// (tests/coordinator/spec_corpus/, spec_crashers/; bench/fuzz_job_spec.sh) through
// ParseJobSpec and job::ParseJobConfig with the fuzzer's own checks, on every CI run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "coordinator/core/job_spec.h"
#include "job/job_config.h"

namespace deepnet::coordinator {
namespace {

namespace fs = std::filesystem;

void ExpectShortInvalidArgument(const absl::Status& status) {
  if (status.ok()) return;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_FALSE(status.message().empty());
  EXPECT_LE(status.message().size(), 4096u);
}

TEST(SpecCorpusTest, EveryCorpusAndCrasherInputIsHandled) {
  int files = 0;
  for (const char* folder : {"spec_corpus", "spec_crashers"}) {
    const fs::path dir = fs::path(DEEPNET_SOURCE_DIR) / "tests/coordinator" / folder;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file() || entry.path().filename().string()[0] == '.') continue;
      SCOPED_TRACE(entry.path().string());
      ++files;
      std::ifstream in(entry.path(), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      JobSpecCheckOptions options;
      options.check_paths = false;
      ExpectShortInvalidArgument(ParseJobSpec(text.str(), options).status());
      absl::StatusOr<job::JobConfig> config = job::ParseJobConfig(text.str(), {}, "corpus");
      ExpectShortInvalidArgument(config.status());
      if (!config.ok()) continue;
      const std::string dumped = job::DumpJobConfig(*config);
      absl::StatusOr<job::JobConfig> again = job::ParseJobConfig(dumped, {}, "dump");
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(job::DumpJobConfig(*again), dumped);
    }
  }
  EXPECT_GE(files, 10);
}

}  // namespace
}  // namespace deepnet::coordinator
