#pragma once
// The coordinator core driven directly (no gRPC): fake worker sessions record the commands it
// sends; a test plays the workers' part (heartbeats, exits, metrics) and calls Tick().

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/store/in_memory_job_store.h"

namespace deepnet::coordinator::testing {

class FakeSink : public WorkerCommandSink {
 public:
  void SendAssignment(int64_t epoch, const AssignmentCommand& command) override {
    assignments.push_back(command);
    epochs.push_back(epoch);
    order.push_back(absl::StrCat("assign ", command.job_id, " attempt ", command.attempt));
  }
  void SendCancellation(int64_t epoch, const CancellationCommand& command) override {
    cancellations.push_back(command);
    order.push_back(absl::StrCat("cancel ", command.job_id, " attempt ", command.attempt));
  }
  void SendLease(int64_t, int64_t, int64_t) override { ++leases; }
  void Close(const absl::Status& status) override { closed = status; }

  std::vector<AssignmentCommand> assignments;
  std::vector<int64_t> epochs;
  std::vector<CancellationCommand> cancellations;
  std::vector<std::string> order;  // assignments and cancellations as sent
  int leases = 0;
  std::optional<absl::Status> closed;
};

inline std::string JobYaml(int stages, int replicas, const std::string& scheduling) {
  return absl::StrCat(
      "name: test-job\n"
      "model: {encoder_layers: 2, decoder_layers: 2, d_model: 16, heads: 2, ffn_dim: 32}\n"
      "train: {max_steps: 10}\n"
      "parallel: {pipeline_stages: ", stages, ", data_parallel: ", replicas, "}\n",
      scheduling.empty() ? "" : "scheduling: " + scheduling + "\n");
}

struct Worker {
  std::string id;
  int64_t epoch = 0;
  std::shared_ptr<FakeSink> sink;
  std::string secret;  // RegistrationResult.session_secret
};

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.heartbeat_interval = std::chrono::milliseconds(50);
    options_.lease_heartbeats = 3;
    options_.stop_timeout = std::chrono::milliseconds(2000);
    options_.reattach_window = std::chrono::milliseconds(300);
    options_.rendezvous_address = "127.0.0.1:1";
    options_.spec_check.check_paths = false;
    Make();
  }

  void Make() {
    if (!epochs_) epochs_ = *WorkerEpochStore::Open("");
    absl::StatusOr<std::unique_ptr<Coordinator>> c =
        Coordinator::Create(options_, &store_, epochs_.get(), &rendezvous_, metrics_);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
  }

  Worker AddWorker(const std::string& name, int slots, std::vector<TaskReport> tasks = {},
                   int64_t slot_memory = 0) {
    Registration reg;
    reg.worker_name = name;
    for (int i = 0; i < slots; ++i) reg.slots.push_back({i, false, -1, slot_memory});
    reg.running_tasks = std::move(tasks);
    absl::StatusOr<RegistrationResult> r = coordinator_->Register(reg);
    EXPECT_TRUE(r.ok()) << r.status();
    Worker w{name, r->epoch, std::make_shared<FakeSink>(), r->session_secret};
    EXPECT_TRUE(coordinator_->AttachSession(name, w.epoch, w.secret, w.sink).ok());
    return w;
  }

  std::string Submit(const std::string& yaml, const std::string& key = "") {
    absl::StatusOr<JobSpecInfo> spec = coordinator_->ParseSpec(yaml);
    EXPECT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<SubmitResultData> r = coordinator_->Submit({"alice", key, yaml, *spec});
    EXPECT_TRUE(r.ok()) << r.status();
    return r->job.record.id;
  }

  JobState State(const std::string& id) { return coordinator_->GetJob(id)->record.state; }

  // Reports every rank of the worker's latest assignment as running.
  void Running(const Worker& w) {
    const AssignmentCommand& a = w.sink->assignments.back();
    std::vector<TaskReport> tasks;
    for (const RankAssignmentData& r : a.ranks) {
      tasks.push_back({a.job_id, a.attempt, r.rank, TaskPhase::kRunning, 100 + r.rank, 0,
                       r.slot_index});
    }
    ASSERT_TRUE(coordinator_->OnHeartbeat(w.id, w.epoch, tasks).ok());
  }

  void Exit(const Worker& w, int code, int signal = 0) {
    const AssignmentCommand& a = w.sink->assignments.back();
    for (const RankAssignmentData& r : a.ranks) {
      ASSERT_TRUE(coordinator_
                      ->OnTrainerExit(w.id, w.epoch, {a.job_id, a.attempt, r.rank, code, signal,
                                                      "last line", false})
                      .ok());
    }
  }

  std::vector<JobEventView> Events(const std::string& id) {
    return coordinator_->WaitEvents(id, 0, absl::ZeroDuration())->events;
  }

  CoordinatorOptions options_;
  CoordinatorMetrics* metrics_ = nullptr;  // set before Make() to export metrics
  InMemoryJobStore store_;
  std::unique_ptr<WorkerEpochStore> epochs_;
  RendezvousStore rendezvous_;
  std::unique_ptr<Coordinator> coordinator_;
};

}  // namespace deepnet::coordinator::testing
