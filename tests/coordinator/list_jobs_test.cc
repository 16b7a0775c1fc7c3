// Coordinator::ListJobs returns summaries unless asked for specs, and bounds a page in bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/coordinator/coordinator_fixture.h"

namespace deepnet::coordinator {
namespace {

using testing::CoordinatorTest;
using testing::JobYaml;

// A legal spec of about `bytes` bytes: a job padded with comment lines.
std::string BigSpec(size_t bytes) {
  std::string yaml = JobYaml(1, 1, "");
  const std::string line = "# " + std::string(98, 'p') + "\n";
  while (yaml.size() + line.size() <= bytes) yaml += line;
  return yaml;
}

class ListJobsTest : public CoordinatorTest {
 protected:
  // Every page of `request` until the last; the jobs' ids in order.
  std::vector<std::string> ListAll(ListRequestData request, std::vector<size_t>* page_sizes) {
    std::vector<std::string> ids;
    for (int pages = 0; pages < 100; ++pages) {
      auto page = coordinator_->ListJobs(request);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      page_sizes->push_back(page->first.size());
      for (const JobView& job : page->first) {
        ids.push_back(job.record.id);
        EXPECT_EQ(job.record.spec_yaml.empty(), !request.include_spec);
      }
      if (page->second.empty()) break;
      request.page_token = page->second;
    }
    return ids;
  }
};

TEST_F(ListJobsTest, SummariesLeaveTheSpecOutAndPagesAreBoundedInBytes) {
  std::vector<std::string> submitted;
  for (int i = 0; i < 6; ++i) submitted.push_back(Submit(BigSpec(900 * 1000)));

  ListRequestData request;
  request.max_bytes = 2 << 20;
  std::vector<size_t> pages;
  EXPECT_EQ(ListAll(request, &pages), submitted);
  EXPECT_EQ(pages, std::vector<size_t>{6});

  request.include_spec = true;
  pages.clear();
  EXPECT_EQ(ListAll(request, &pages), submitted);
  EXPECT_EQ(pages, (std::vector<size_t>{2, 2, 2}));

  // A page too small for one job still returns one, and the token moves on.
  request.max_bytes = 1000;
  request.page_size = 4;
  pages.clear();
  EXPECT_EQ(ListAll(request, &pages), submitted);
  EXPECT_EQ(pages, (std::vector<size_t>{1, 1, 1, 1, 1, 1}));

  // page_size still applies, with the byte bound off.
  request.max_bytes = 0;
  pages.clear();
  EXPECT_EQ(ListAll(request, &pages), submitted);
  EXPECT_EQ(pages, (std::vector<size_t>{4, 2}));

  // GetJob keeps the full spec.
  EXPECT_EQ(coordinator_->GetJob(submitted[0])->record.spec_yaml.size(),
            BigSpec(900 * 1000).size());
}

TEST(JobNumberFromIdTest, ParsesOnlyJobIds) {
  EXPECT_EQ(*JobNumberFromId("j-000042"), 42);
  EXPECT_EQ(*JobNumberFromId(JobIdFromNumber(12345678)), 12345678);
  for (const char* bad : {"", "j-", "x-1", "j-1a", "j--1", "j-99999999999999999999"}) {
    EXPECT_FALSE(JobNumberFromId(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace deepnet::coordinator
