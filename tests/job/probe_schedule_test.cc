#include "job/probe_schedule.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "job/job_config.h"

namespace deepnet::job {
namespace {

std::vector<int64_t> StepsUpTo(const ProbeSchedule& s, int64_t last) {
  std::vector<int64_t> out;
  for (int64_t step = 1; step <= last; ++step) {
    if (s.Contains(step)) out.push_back(step);
  }
  return out;
}

TEST(ProbeScheduleTest, SinglesRangesAndStridedRanges) {
  auto s = ProbeSchedule::Parse("1-3, 5,10:30:10");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(StepsUpTo(*s, 40), (std::vector<int64_t>{1, 2, 3, 5, 10, 20, 30}));
}

TEST(ProbeScheduleTest, TheFig4ScheduleProbesStepsOneToNineThenEveryTenth) {
  auto s = ProbeSchedule::Parse("1-9,10:100:10");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(StepsUpTo(*s, 200), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30, 40, 50,
                                                      60, 70, 80, 90, 100}));
}

TEST(ProbeScheduleTest, OpenEndedStridedRangeHasNoEnd) {
  auto s = ProbeSchedule::Parse("100::100");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->Contains(99));
  EXPECT_TRUE(s->Contains(100));
  EXPECT_FALSE(s->Contains(150));
  EXPECT_TRUE(s->Contains(1000000000000));
  auto offset = ProbeSchedule::Parse("7::5");
  ASSERT_TRUE(offset.ok());
  EXPECT_EQ(StepsUpTo(*offset, 20), (std::vector<int64_t>{7, 12, 17}));
}

TEST(ProbeScheduleTest, StridedRangeStopsAtItsEndEvenOffTheStride) {
  auto s = ProbeSchedule::Parse("2:9:3");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(StepsUpTo(*s, 20), (std::vector<int64_t>{2, 5, 8}));
}

TEST(ProbeScheduleTest, EmptyTextProbesNothingAndEveryMatchesProbeEvery) {
  auto s = ProbeSchedule::Parse("  ");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->empty());
  EXPECT_TRUE(StepsUpTo(*s, 50).empty());
  EXPECT_EQ(StepsUpTo(ProbeSchedule::Every(4), 13), (std::vector<int64_t>{4, 8, 12}));
  EXPECT_TRUE(ProbeSchedule::Every(0).empty());
}

TEST(ProbeScheduleTest, ErrorsNameTheFieldAndTheBadItem) {
  struct Case {
    std::string text, item;
  };
  for (const Case& c : std::vector<Case>{{"1-9,x", "x"},
                                         {"5-2", "5-2"},
                                         {"0", "0"},
                                         {"1,,3", ""},
                                         {"10:5:1", "10:5:1"},
                                         {"1:10:0", "1:10:0"},
                                         {"1:10", "1:10"},
                                         {"-3", "-3"},
                                         {"1-", "1-"},
                                         {"3::", "3::"},
                                         {"1:2:3:4", "1:2:3:4"},
                                         {"99999999999999999999", "99999999999999999999"}}) {
    auto s = ProbeSchedule::Parse(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(s.status().message());
    EXPECT_EQ(message.rfind("train.probe_schedule: item '" + c.item + "'", 0), 0u) << message;
  }
  auto s = ProbeSchedule::Parse("5-2");
  EXPECT_NE(std::string(s.status().message()).find("range end 2 is before its start 5"),
            std::string::npos);
}

TEST(ProbeScheduleTest, JobConfigRejectsABadScheduleNamingTheField) {
  auto config = ParseJobConfig("name: t\ntrain:\n  probe_schedule: \"1-9,abc\"\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(std::string(config.status().message()).find("train.probe_schedule: item 'abc'"),
            std::string::npos)
      << config.status();
  auto good = ParseJobConfig(
      "name: t\ntrain:\n  probe_schedule: \"1-9,10:100:10\"\n  probe_file: p.tsv\n"
      "  diagnostics_every: 5\n");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->train.probe_schedule, "1-9,10:100:10");
  EXPECT_EQ(good->train.probe_file, "p.tsv");
  EXPECT_EQ(good->train.diagnostics_every, 5);
  auto round = ParseJobConfig(DumpJobConfig(*good));
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(round->train.probe_schedule, good->train.probe_schedule);
  EXPECT_EQ(round->train.probe_file, good->train.probe_file);
  EXPECT_EQ(round->train.diagnostics_every, 5);
  auto negative = ParseJobConfig("name: t\ntrain:\n  diagnostics_every: -1\n");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(std::string(negative.status().message()).find("train.diagnostics_every"),
            std::string::npos);
}

}  // namespace
}  // namespace deepnet::job
