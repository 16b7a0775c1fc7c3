// Trainer logs on the worker: ReadTrainerLog's bounds and refusals, and a WorkerDaemon answering
// the coordinator's LogRequest over its session (a fake coordinator and the fake trainer).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/worker/fake_worker_service.h"
#include "tests/worker/worker_test_util.h"
#include "worker/trainer_log_reader.h"
#include "worker/worker_daemon.h"

namespace deepnet::worker {
namespace {

namespace v1 = deepnet::v1;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Messages = std::vector<v1::WorkerMessage>;

class TrainerLogReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = dir_.path() + "/work";
    std::filesystem::create_directories(work_ + "/j-1/attempt-2");
    std::ofstream(work_ + "/j-1/attempt-2/rank-3.stderr.log") << "0123456789";
    std::ofstream(work_ + "/j-1/attempt-2/rank-3.stdout.log") << "{\"event\":\"start\"}\n";
    std::ofstream(dir_.path() + "/secret") << "not a log";
  }
  TrainerLogRead Request() const {
    TrainerLogRead read;
    read.job_id = "j-1";
    read.attempt = 2;
    read.rank = 3;
    return read;
  }

  testing::TempDir dir_;
  std::string work_;
};

TEST_F(TrainerLogReaderTest, ReadsTheRequestedPartOfEitherStream) {
  absl::StatusOr<TrainerLogPart> all = ReadTrainerLog(work_, Request());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->data, "0123456789");
  EXPECT_EQ(all->offset, 0);
  EXPECT_EQ(all->size, 10);
  TrainerLogRead read = Request();
  read.offset = 4;
  read.max_bytes = 3;
  EXPECT_EQ(ReadTrainerLog(work_, read)->data, "456");
  read.offset = 10;  // at the end: nothing, not an error
  EXPECT_EQ(ReadTrainerLog(work_, read)->data, "");
  read.tail_bytes = 4;  // wins over offset
  EXPECT_EQ(ReadTrainerLog(work_, read)->data, "678");  // still max_bytes 3
  EXPECT_EQ(ReadTrainerLog(work_, read)->offset, 6);
  read.tail_bytes = 1000;
  read.max_bytes = 0;
  EXPECT_EQ(ReadTrainerLog(work_, read)->data, "0123456789");
  read = Request();
  read.stream = TrainerLogStream::kStdout;
  EXPECT_EQ(ReadTrainerLog(work_, read)->data, "{\"event\":\"start\"}\n");
}

TEST_F(TrainerLogReaderTest, NoReadIsLargerThan64KiB) {
  std::ofstream(work_ + "/j-1/attempt-2/rank-3.stderr.log") << std::string(200 * 1024, 'x');
  TrainerLogRead read = Request();
  read.max_bytes = int64_t{1} << 40;
  absl::StatusOr<TrainerLogPart> part = ReadTrainerLog(work_, read);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->data.size(), static_cast<size_t>(kMaxLogReadBytes));
  EXPECT_EQ(part->size, 200 * 1024);
}

TEST_F(TrainerLogReaderTest, RefusesPathsOutsideItsLogsAndBadNumbers) {
  for (const char* job : {"..", ".", "../work/j-1", "j-1/attempt-2", "", "a b"}) {
    TrainerLogRead read = Request();
    read.job_id = job;
    absl::StatusOr<TrainerLogPart> part = ReadTrainerLog(work_, read);
    EXPECT_EQ(part.status().code(), absl::StatusCode::kInvalidArgument) << job;
    EXPECT_THAT(part.status().message(), HasSubstr("job_id")) << job;
  }
  TrainerLogRead read = Request();
  read.attempt = 0;
  EXPECT_THAT(ReadTrainerLog(work_, read).status().message(), HasSubstr("attempt"));
  read = Request();
  read.rank = -1;
  EXPECT_THAT(ReadTrainerLog(work_, read).status().message(), HasSubstr("rank"));
  read = Request();
  read.offset = -1;
  EXPECT_EQ(ReadTrainerLog(work_, read).status().code(), absl::StatusCode::kInvalidArgument);
  read.offset = 11;
  EXPECT_EQ(ReadTrainerLog(work_, read).status().code(), absl::StatusCode::kOutOfRange);
  read.offset = int64_t{1} << 62;
  EXPECT_THAT(ReadTrainerLog(work_, read).status().message(), HasSubstr("past the end"));
  read = Request();
  read.rank = 4;
  EXPECT_EQ(ReadTrainerLog(work_, read).status().code(), absl::StatusCode::kNotFound);
  // A log replaced by a link to another file is not followed.
  const std::string link = work_ + "/j-1/attempt-2/rank-5.stderr.log";
  ASSERT_EQ(symlink((dir_.path() + "/secret").c_str(), link.c_str()), 0);
  read.rank = 5;
  absl::StatusOr<TrainerLogPart> linked = ReadTrainerLog(work_, read);
  EXPECT_EQ(linked.status().code(), absl::StatusCode::kFailedPrecondition);
  std::filesystem::create_directories(work_ + "/j-1/attempt-2/rank-6.stderr.log");
  read.rank = 6;
  EXPECT_EQ(ReadTrainerLog(work_, read).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A real WorkerDaemon answers LogRequests on its session; bad ones are refused, not fatal.
TEST(WorkerDaemonLogTest, AnswersLogRequestsAndRefusesBadOnesWithoutEndingTheSession) {
  testing::TempDir dir;
  testing::FakeCoordinator coordinator;
  ASSERT_TRUE(coordinator.ok());
  const std::string fake_dir = dir.path() + "/fake";
  std::filesystem::create_directories(fake_dir);
  WorkerDaemonOptions options;
  options.coordinator = coordinator.address();
  options.worker_name = "node-a";
  options.supervisor.trainer = testing::WriteFakeTrainer(dir.path());
  options.supervisor.work_dir = dir.path() + "/work";
  options.supervisor.slots = {{0, false, -1}};
  options.supervisor.base_env = {"PATH=/usr/bin:/bin"};
  auto daemon = WorkerDaemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  (*daemon)->Start();
  ASSERT_TRUE(coordinator.service().WaitForRegistrations(1));

  v1::CoordinatorMessage assign;
  v1::Assignment* a = assign.mutable_assignment();
  a->set_job_id("job-l");
  a->set_attempt(1);
  a->add_ranks()->set_rank(0);
  a->set_world_size(1);
  a->set_config_yaml("name: log-test\n");
  (*a->mutable_env())["FAKE_DIR"] = fake_dir;
  (*a->mutable_env())["FAKE_MODE"] = "run";
  coordinator.service().Send(assign);
  ASSERT_TRUE(testing::WaitUntil([&] { return !testing::ReadFile(fake_dir + "/ready-0").empty(); }));

  auto ask = [&](int64_t id, const std::string& job, int attempt, bool stale_epoch = false) {
    v1::CoordinatorMessage message;
    v1::LogRequest* r = message.mutable_log_request();
    r->set_request_id(id);
    r->set_job_id(job);
    r->set_attempt(attempt);
    r->set_rank(0);
    if (stale_epoch) message.set_epoch(coordinator.service().epoch() - 1);
    coordinator.service().Send(message, stale_epoch);
    std::optional<v1::LogChunk> found;
    coordinator.service().WaitFor([&](const Messages& messages) {
      for (const auto& m : messages) {
        if (m.has_log_chunk() && m.log_chunk().request_id() == id) found = m.log_chunk();
      }
      return found.has_value();
    });
    return found;
  };
  std::optional<v1::LogChunk> chunk = ask(1, "job-l", 1);
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->error_code(), 0) << chunk->error();
  EXPECT_EQ(chunk->data(), "fake trainer rank 0: stderr line\n");
  EXPECT_EQ(chunk->size(), static_cast<int64_t>(chunk->data().size()));
  EXPECT_TRUE(chunk->running());
  std::optional<v1::LogChunk> traversal = ask(2, "../../etc", 1);
  ASSERT_TRUE(traversal.has_value());
  EXPECT_EQ(traversal->error_code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(traversal->error(), HasSubstr("job_id"));
  EXPECT_TRUE(traversal->data().empty());
  std::optional<v1::LogChunk> stale = ask(3, "job-l", 1, /*stale_epoch=*/true);
  ASSERT_TRUE(stale.has_value());
  EXPECT_EQ(stale->error_code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  std::optional<v1::LogChunk> missing = ask(4, "job-l", 7);
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->error_code(), static_cast<int>(absl::StatusCode::kNotFound));
  // The session survived all of it: still the first registration, still answering.
  EXPECT_EQ(coordinator.service().registrations().size(), 1u);
  EXPECT_TRUE(ask(5, "job-l", 1).has_value());
  (*daemon)->Shutdown(0ms);
  testing::KillPidIn(fake_dir + "/pid-0");
}

}  // namespace
}  // namespace deepnet::worker
