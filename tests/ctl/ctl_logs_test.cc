// `deepnetctl logs` in-process against a FakeJobService: what it asks for, that it writes the
// log's bytes unchanged, and its notes and exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ctl/ctl_app.h"
#include "tests/ctl/run_ctl.h"
#include "tests/ctl/fake_job_service.h"

namespace deepnet::ctl {
namespace {

using ::testing::HasSubstr;

v1::GetJobLogsResponse Part(const std::string& data, int64_t offset, int64_t size) {
  v1::GetJobLogsResponse part;
  part.set_data(data);
  part.set_offset(offset);
  part.set_size(size);
  part.set_attempt(2);
  part.set_rank(1);
  part.set_worker_id("node-b");
  part.set_stream(v1::LOG_STREAM_STDERR);
  return part;
}

class CtlLogsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.ok()); }

  testing::FakeJobService& fake() { return server_.service(); }

  int Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--coordinator", server_.address()});
    return testing::RunCtlQuietEnv(std::move(args), out_, err_);
  }

  testing::FakeServer server_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(CtlLogsTest, DefaultsLeaveRankAndAttemptToTheCoordinatorAndBytesPassUnchanged) {
  const std::string binary("line one\n\x00\xff half", 15);
  fake().log_messages = {Part("", 0, 21), Part(binary, 0, 21), Part("line\n", 15, 21)};
  ASSERT_EQ(Run({"logs", "j-7"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), binary + "line\n");
  ASSERT_EQ(fake().log_requests.size(), 1u);
  const v1::GetJobLogsRequest& sent = fake().log_requests[0];
  EXPECT_EQ(sent.job_id(), "j-7");
  EXPECT_EQ(sent.attempt(), 0);
  EXPECT_FALSE(sent.has_rank());
  EXPECT_EQ(sent.stream(), v1::LOG_STREAM_STDERR);
  EXPECT_EQ(sent.tail_bytes(), 0);
  EXPECT_FALSE(sent.follow());
  // The coordinator chose the rank: say which one it is.
  EXPECT_THAT(err_.str(), HasSubstr("job j-7 attempt 2 rank 1 (worker node-b), stderr"));
}

TEST_F(CtlLogsTest, FlagsReachTheRequest) {
  fake().log_messages = {Part("x", 0, 1)};
  ASSERT_EQ(Run({"logs", "j-7", "--rank", "0", "--attempt", "3", "--stdout", "--tail-bytes",
                 "4096", "-f"}),
            0)
      << err_.str();
  const v1::GetJobLogsRequest& sent = fake().log_requests.at(0);
  ASSERT_TRUE(sent.has_rank());
  EXPECT_EQ(sent.rank(), 0);
  EXPECT_EQ(sent.attempt(), 3);
  EXPECT_EQ(sent.stream(), v1::LOG_STREAM_STDOUT);
  EXPECT_EQ(sent.tail_bytes(), 4096);
  EXPECT_TRUE(sent.follow());
  EXPECT_EQ(err_.str(), "");  // rank given: no note
  ASSERT_EQ(Run({"logs", "j-7", "--offset", "100"}), 0);
  EXPECT_EQ(fake().log_requests.at(1).offset(), 100);
}

TEST_F(CtlLogsTest, BadFlagsAreUsageErrorsAndNothingIsSent) {
  EXPECT_EQ(Run({"logs"}), 2);
  EXPECT_EQ(Run({"logs", "j-7", "--rank", "-1"}), 2);
  EXPECT_EQ(Run({"logs", "j-7", "--attempt", "0"}), 2);
  EXPECT_EQ(Run({"logs", "j-7", "--tail-bytes", "10", "--offset", "5"}), 2);
  EXPECT_TRUE(fake().log_requests.empty());
}

TEST_F(CtlLogsTest, TruncatedCallSaysWhereToContinue) {
  v1::GetJobLogsResponse last = Part("abc", 100, 500);
  last.set_truncated(true);
  fake().log_messages = {last};
  ASSERT_EQ(Run({"logs", "j-7", "--rank", "1"}), 0);
  EXPECT_EQ(out_.str(), "abc");
  EXPECT_THAT(err_.str(), HasSubstr("continue with --offset 103"));
}

TEST_F(CtlLogsTest, ErrorsMapToExitCodesAfterWhatWasPrinted) {
  fake().log_messages = {Part("partial\n", 0, 8)};
  fake().logs_end = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 "worker node-b, which ran rank 1 of job j-7 attempt 2, is lost");
  EXPECT_EQ(Run({"logs", "j-7", "-f"}), 6);
  EXPECT_EQ(out_.str(), "partial\n");
  EXPECT_THAT(err_.str(), HasSubstr("UNAVAILABLE: worker node-b"));
  fake().log_messages.clear();
  fake().logs_end = grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "user bob may not");
  EXPECT_EQ(Run({"logs", "j-7"}), 5);
  fake().logs_end = grpc::Status(grpc::StatusCode::NOT_FOUND, "job j-8 does not exist");
  EXPECT_EQ(Run({"logs", "j-8"}), 4);
  fake().logs_end = grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "offset 9 is past the end");
  EXPECT_EQ(Run({"logs", "j-7", "--offset", "9"}), 3);
}

}  // namespace
}  // namespace deepnet::ctl
