// Trainer logs through the coordinator core (no gRPC): which worker a read goes to, the default
// rank and attempt, answers matched by request id, and silent, disconnected or lost workers.
// LogServingSink plays each worker's part; the test calls Tick() and the worker reports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/grpc/job_log_stream.h"
#include "coordinator/store/in_memory_job_store.h"
#include "tests/coordinator/log_serving_sink.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::LogServingSink;
using namespace std::chrono_literals;

// Liveness bound of the waits below (never reached when the code works).
constexpr auto kLogsLiveness = 30s;

std::string JobYaml(int stages, const std::string& scheduling) {
  return absl::StrCat(
      "name: log-job\n"
      "model: {encoder_layers: 2, decoder_layers: 2, d_model: 16, heads: 2, ffn_dim: 32}\n"
      "train: {max_steps: 10}\n"
      "parallel: {pipeline_stages: ", stages, ", data_parallel: 1}\n",
      scheduling.empty() ? "" : "scheduling: " + scheduling + "\n");
}

class JobLogsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.heartbeat_interval = 50ms;
    options_.lease_heartbeats = 3;
    options_.rendezvous_address = "127.0.0.1:1";
    options_.spec_check.check_paths = false;
    options_.log_request_timeout = kLogsLiveness;
    Make();
  }
  void TearDown() override { StopWorkers(); }

  void StopWorkers() {
    for (auto& [name, sink] : sinks_) sink->Stop();
  }
  void Make() {
    StopWorkers();
    sinks_.clear();
    coordinator_.reset();
    if (!epochs_) epochs_ = *WorkerEpochStore::Open("");
    auto c = Coordinator::Create(options_, &store_, epochs_.get(), &rendezvous_, nullptr);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
  }

  LogServingSink& AddWorker(const std::string& name) {
    Registration reg;
    reg.worker_name = name;
    reg.slots.push_back({0, false, -1});
    absl::StatusOr<RegistrationResult> r = coordinator_->Register(reg);
    EXPECT_TRUE(r.ok()) << r.status();
    auto sink = std::make_shared<LogServingSink>(coordinator_.get(), name);
    sink->set_epoch(r->epoch);
    epoch_of_[name] = r->epoch;
    EXPECT_TRUE(coordinator_->AttachSession(name, r->epoch, r->session_secret, sink).ok());
    sinks_[name] = sink;
    return *sink;
  }

  std::string Submit(const std::string& yaml, const std::string& owner = "alice") {
    absl::StatusOr<JobSpecInfo> spec = coordinator_->ParseSpec(yaml);
    EXPECT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<SubmitResultData> r = coordinator_->Submit({owner, "", yaml, *spec});
    EXPECT_TRUE(r.ok()) << r.status();
    return r->job.record.id;
  }

  // The worker holding `rank` of the job's latest assignment.
  std::string HolderOf(int rank, int attempt) {
    for (auto& [name, sink] : sinks_) {
      for (const AssignmentCommand& a : sink->assignments()) {
        if (a.attempt != attempt) continue;
        for (const RankAssignmentData& r : a.ranks) {
          if (r.rank == rank) return name;
        }
      }
    }
    return "";
  }

  void Exit(const std::string& worker, const std::string& job, int attempt, int rank, int code) {
    ASSERT_TRUE(coordinator_
                    ->OnTrainerExit(worker, epoch_of_[worker],
                                    {job, attempt, rank, code, 0, "boom", false})
                    .ok());
  }

  absl::StatusOr<LogChunkReport> Read(const std::string& job, int attempt, std::optional<int> rank,
                                      int64_t offset = 0) {
    absl::StatusOr<LogSource> source = coordinator_->FindLogSource(job, attempt, rank);
    if (!source.ok()) return source.status();
    LogRequestCommand request;
    request.offset = offset;
    return coordinator_->ReadLog(*source, request);
  }

  CoordinatorOptions options_;
  InMemoryJobStore store_;
  std::unique_ptr<WorkerEpochStore> epochs_;
  RendezvousStore rendezvous_;
  std::unique_ptr<Coordinator> coordinator_;
  std::map<std::string, std::shared_ptr<LogServingSink>> sinks_;
  std::map<std::string, int64_t> epoch_of_;
};

TEST_F(JobLogsTest, EachRankIsReadFromTheWorkerThatRanIt) {
  AddWorker("a");
  AddWorker("b");
  const std::string id = Submit(JobYaml(2, ""));
  coordinator_->Tick();
  const std::string h0 = HolderOf(0, 1), h1 = HolderOf(1, 1);
  ASSERT_FALSE(h0.empty());
  ASSERT_FALSE(h1.empty());
  ASSERT_NE(h0, h1);
  sinks_[h0]->SetLog({id, 1, 0, LogStream::kStderr}, "rank 0 on " + h0, true);
  sinks_[h1]->SetLog({id, 1, 1, LogStream::kStderr}, "rank 1 on " + h1, true);
  absl::StatusOr<LogChunkReport> r1 = Read(id, 0, 1);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->data, "rank 1 on " + h1);
  EXPECT_TRUE(r1->running);
  ASSERT_EQ(sinks_[h1]->requests().size(), 1u);
  EXPECT_TRUE(sinks_[h0]->requests().empty());
  const LogRequestCommand sent = sinks_[h1]->requests()[0];
  EXPECT_EQ(sent.job_id, id);
  EXPECT_EQ(sent.attempt, 1);
  EXPECT_EQ(sent.rank, 1);
  absl::StatusOr<LogChunkReport> r0 = Read(id, 1, 0);
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_EQ(r0->data, "rank 0 on " + h0);
  EXPECT_NE(sinks_[h0]->requests()[0].request_id, sent.request_id);
  // The worker's refusal comes back with its code, naming the worker.
  absl::StatusOr<LogChunkReport> past = Read(id, 1, 0, 1000);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(past.status().message(), HasSubstr("worker " + h0));
  // An answer nobody waits for (or from the wrong worker) changes nothing.
  EXPECT_TRUE(coordinator_->OnLogChunk(h0, epoch_of_[h0], {12345, "x", 0, 1, false, {}}).ok());
  EXPECT_EQ(coordinator_->OnLogChunk(h0, epoch_of_[h0] - 1, {1, "x", 0, 1, false, {}}).code(),
            absl::StatusCode::kAborted);
}

TEST_F(JobLogsTest, DefaultsAreTheLatestAttemptAndTheRankWhoseFailureEndedIt) {
  AddWorker("a");
  AddWorker("b");
  const std::string id = Submit(JobYaml(2, "{max_restarts: 1}"));
  coordinator_->Tick();
  const std::string failed_on = HolderOf(1, 1), other = HolderOf(0, 1);
  Exit(failed_on, id, 1, 1, 3);
  Exit(other, id, 1, 0, 143);  // stopped because rank 1 failed
  coordinator_->Tick();
  ASSERT_EQ(coordinator_->GetJob(id)->record.attempt, 2);
  absl::StatusOr<LogSource> latest = coordinator_->FindLogSource(id, 0, std::nullopt);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->attempt, 2);
  EXPECT_EQ(latest->rank, 0);  // nothing failed in attempt 2 yet
  EXPECT_EQ(latest->worker_id, HolderOf(0, 2));
  absl::StatusOr<LogSource> first = coordinator_->FindLogSource(id, 1, std::nullopt);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->rank, 1);
  EXPECT_EQ(first->worker_id, failed_on);
  // Cancelled: the ranks' SIGTERM exits are not a failure, so rank 0.
  ASSERT_TRUE(coordinator_->Cancel(id, "enough").ok());
  Exit(HolderOf(1, 2), id, 2, 1, 143);
  Exit(HolderOf(0, 2), id, 2, 0, 143);
  ASSERT_EQ(coordinator_->GetJob(id)->record.state, JobState::kCancelled);
  EXPECT_EQ(coordinator_->FindLogSource(id, 2, std::nullopt)->rank, 0);
  // Bad requests name the field; unknown and not yet started jobs say so.
  EXPECT_THAT(coordinator_->FindLogSource(id, 3, std::nullopt).status().message(),
              HasSubstr("attempt: job " + id + " has attempts 1..2"));
  EXPECT_THAT(coordinator_->FindLogSource(id, 0, 2).status().message(), HasSubstr("rank:"));
  EXPECT_EQ(coordinator_->FindLogSource("j-nope", 0, 0).status().code(),
            absl::StatusCode::kNotFound);
  Submit(JobYaml(2, ""));
  const std::string waiting = Submit(JobYaml(2, ""));  // the first takes both slots
  coordinator_->Tick();
  EXPECT_EQ(coordinator_->FindLogSource(waiting, 0, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The placement is durable: a restarted coordinator still knows who ran attempt 1.
  Make();
  EXPECT_EQ(coordinator_->FindLogSource(id, 1, std::nullopt)->worker_id, failed_on);
}

TEST_F(JobLogsTest, SilentWorkerTimesOutNamingItAndTheSessionGoesOn) {
  options_.log_request_timeout = 50ms;
  Make();
  LogServingSink& a = AddWorker("a");
  const std::string id = Submit(JobYaml(1, ""));
  coordinator_->Tick();
  a.SetLog({id, 1, 0, LogStream::kStderr}, "hello", true);
  a.set_silent(true);  // like a deepnet-worker that does not know LogRequest
  absl::StatusOr<LogChunkReport> silent = Read(id, 0, 0);
  EXPECT_EQ(silent.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(silent.status().message(), HasSubstr("worker a, which ran rank 0 of job " + id));
  EXPECT_THAT(silent.status().message(), HasSubstr("did not answer"));
  a.set_silent(false);
  // The answering worker is read again; with this short timeout a slow machine may miss it
  // once, so retry (a worker that stays unreadable fails at the liveness bound).
  absl::StatusOr<LogChunkReport> again = Read(id, 0, 0);
  const auto give_up = std::chrono::steady_clock::now() + kLogsLiveness;
  while (!again.ok() && again.status().code() == absl::StatusCode::kUnavailable &&
         std::chrono::steady_clock::now() < give_up) {
    again = Read(id, 0, 0);
  }
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->data, "hello");
}

TEST_F(JobLogsTest, AnswersThatBreakTheContractFailTheReadNamingTheWorker) {
  LogServingSink& a = AddWorker("a");
  const std::string id = Submit(JobYaml(1, ""));
  coordinator_->Tick();
  a.SetLog({id, 1, 0, LogStream::kStderr}, std::string(100, 'x'), true);
  // More than the 64 KiB a read may bring (and than the log holds).
  a.set_tamper([](LogChunkReport& c) {
    c.data.append(static_cast<size_t>(kMaxLogChunkBytes), 'y');
    c.size += kMaxLogChunkBytes;
  });
  absl::StatusOr<LogChunkReport> big = Read(id, 0, 0);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(big.status().message(), HasSubstr("worker a answered log request"));
  // Not where it was asked to start, or past the log's end: a stream could not progress.
  a.set_tamper([](LogChunkReport& c) { c.offset += 1; });
  EXPECT_EQ(Read(id, 0, 0, 10).status().code(), absl::StatusCode::kInternal);
  a.set_tamper([](LogChunkReport& c) { c.size = 5; });
  EXPECT_EQ(Read(id, 0, 0).status().code(), absl::StatusCode::kInternal);
  a.set_tamper([](LogChunkReport& c) { c.offset = -1; });
  EXPECT_EQ(Read(id, 0, 0).status().code(), absl::StatusCode::kInternal);
  // A refusal is the worker's answer, whatever its other fields; a well-formed answer reads.
  a.set_tamper([](LogChunkReport& c) {
    c.error = absl::NotFoundError("gone");
    c.offset = -1;
  });
  EXPECT_EQ(Read(id, 0, 0).status().code(), absl::StatusCode::kNotFound);
  a.set_tamper(nullptr);
  absl::StatusOr<LogChunkReport> fine = Read(id, 0, 0, 10);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(fine->data, std::string(90, 'x'));
  EXPECT_EQ(fine->offset, 10);
  // A request asking for more than a chunk may hold is sent bounded.
  LogRequestCommand request;
  request.max_bytes = int64_t{1} << 40;
  ASSERT_TRUE(coordinator_->ReadLog(*coordinator_->FindLogSource(id, 0, 0), request).ok());
  EXPECT_EQ(a.requests().back().max_bytes, kMaxLogChunkBytes);
}

TEST_F(JobLogsTest, ReadsEndUnavailableWhenTheWorkerDisconnectsOrIsLost) {
  LogServingSink& a = AddWorker("a");
  const std::string id = Submit(JobYaml(1, ""));
  coordinator_->Tick();
  a.set_silent(true);
  auto pending = std::async(std::launch::async, [&] { return Read(id, 0, 0); });
  const auto give_up = std::chrono::steady_clock::now() + kLogsLiveness;
  while (a.requests().empty() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(a.requests().size(), 1u);
  coordinator_->DetachSession("a", epoch_of_["a"], &a);
  absl::StatusOr<LogChunkReport> ended = pending.get();
  EXPECT_EQ(ended.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(ended.status().message(), HasSubstr("worker a went away"));
  EXPECT_THAT(Read(id, 0, 0).status().message(), HasSubstr("has no session"));
  // No heartbeats: once its lease runs out the worker is lost.
  while (Read(id, 0, 0).status().message().find("is lost") == std::string::npos &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(50ms);
    coordinator_->Tick();
  }
  EXPECT_THAT(Read(id, 0, 0).status().message(), HasSubstr("worker a, which ran rank 0"));
  EXPECT_THAT(Read(id, 0, 0).status().message(), HasSubstr("is lost"));
}

// The GetJobLogs loop: parts of at most 64 KiB, tail and offset, and following a growing log.
TEST_F(JobLogsTest, StreamSendsBoundedPartsAndFollowsUntilTheRankExits) {
  LogServingSink& a = AddWorker("a");
  const std::string id = Submit(JobYaml(1, ""));
  coordinator_->Tick();
  const LogServingSink::LogKey key{id, 1, 0, LogStream::kStderr};
  std::string big;
  for (int i = 0; big.size() < 150 * 1024; ++i) absl::StrAppend(&big, "line ", i, "\n");
  a.SetLog(key, big, false);
  std::vector<LogPart> parts;
  int sleeps = 0;
  LogCallHooks hooks;
  hooks.write = [&](const LogPart& p) {
    parts.push_back(p);
    return true;
  };
  hooks.cancelled = [] { return false; };
  hooks.sleep = [&](absl::Duration) { ++sleeps; };
  LogCallRequest request;
  request.job_id = id;
  ASSERT_TRUE(StreamJobLogs(*coordinator_, request, hooks).ok());
  ASSERT_EQ(parts.size(), 3u);
  std::string joined;
  for (const LogPart& p : parts) {
    EXPECT_LE(p.data.size(), static_cast<size_t>(kLogPartBytes));
    EXPECT_EQ(p.offset, static_cast<int64_t>(joined.size()));
    EXPECT_EQ(p.source.worker_id, "a");
    joined += p.data;
  }
  EXPECT_EQ(joined, big);
  parts.clear();
  request.tail_bytes = 6;
  ASSERT_TRUE(StreamJobLogs(*coordinator_, request, hooks).ok());
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].data, big.substr(big.size() - 6));
  request.offset = 3;
  EXPECT_THAT(StreamJobLogs(*coordinator_, request, hooks).message(),
              HasSubstr("offset and tail_bytes"));
  request = LogCallRequest{id, 0, 0, LogStream::kStderr, 0, -1, false};
  EXPECT_THAT(StreamJobLogs(*coordinator_, request, hooks).message(), HasSubstr("offset: -1"));
  // Follow: new output is polled for until the trainer is no longer running.
  a.SetLog(key, "a\n", true);
  parts.clear();
  hooks.sleep = [&](absl::Duration) {
    ++sleeps;
    a.AppendLog(key, sleeps == 1 ? "b\n" : "c\n", /*running=*/sleeps == 1);
  };
  sleeps = 0;
  request = LogCallRequest{id, 0, 0, LogStream::kStderr, 0, 0, true};
  ASSERT_TRUE(StreamJobLogs(*coordinator_, request, hooks).ok());
  EXPECT_EQ(sleeps, 2);
  joined.clear();
  for (const LogPart& p : parts) joined += p.data;
  EXPECT_EQ(joined, "a\nb\nc\n");
  // A client that goes away ends a follow.
  a.SetLog(key, "x", true);
  hooks.sleep = [](absl::Duration) {};
  int polls = 0;
  hooks.cancelled = [&] { return ++polls > 3; };
  EXPECT_EQ(StreamJobLogs(*coordinator_, request, hooks).code(), absl::StatusCode::kCancelled);
}

// Without follow a call stops at kMaxLogBytesPerCall and marks its last part, so a huge log
// cannot hold a coordinator thread for long; the next call continues from there.
TEST_F(JobLogsTest, CallWithoutFollowStopsAtItsLimitAndSaysWhere) {
  LogServingSink& a = AddWorker("a");
  const std::string id = Submit(JobYaml(1, ""));
  coordinator_->Tick();
  std::string log(static_cast<size_t>(kMaxLogBytesPerCall) + 10, 'x');
  log.back() = 'z';
  a.SetLog({id, 1, 0, LogStream::kStderr}, log, false);
  std::vector<LogPart> parts;
  LogCallHooks hooks;
  hooks.write = [&](const LogPart& p) {
    parts.push_back(p);
    return true;
  };
  hooks.cancelled = [] { return false; };
  hooks.sleep = [](absl::Duration) {};
  LogCallRequest request;
  request.job_id = id;
  ASSERT_TRUE(StreamJobLogs(*coordinator_, request, hooks).ok());
  ASSERT_FALSE(parts.empty());
  int64_t sent = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(parts[i].truncated, i + 1 == parts.size()) << i;
    sent += static_cast<int64_t>(parts[i].data.size());
  }
  EXPECT_EQ(sent, kMaxLogBytesPerCall);
  EXPECT_EQ(parts.back().offset + static_cast<int64_t>(parts.back().data.size()), sent);
  parts.clear();
  request.offset = sent;
  ASSERT_TRUE(StreamJobLogs(*coordinator_, request, hooks).ok());
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].data, "xxxxxxxxxz");
  EXPECT_FALSE(parts[0].truncated);
}

}  // namespace
}  // namespace deepnet::coordinator
