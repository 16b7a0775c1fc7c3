// The coordinator queues what the cluster may yet hold: jobs larger than the registered workers
// wait with a pending reason and code until workers join (only --cluster-slots refuses), and
// ListWorkers shows the workers, their slots and what holds them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "coordinator/core/coordinator_metrics.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::CoordinatorTest;
using testing::JobYaml;
using testing::Worker;

class CoordinatorQueueTest : public CoordinatorTest {
 protected:
  JobView Job(const std::string& id) { return *coordinator_->GetJob(id); }

  // Heartbeats `alive` and ticks until `silent`'s lease has run out (losing it closes its
  // session).
  void LoseByLease(const Worker& silent, const Worker& alive) {
    for (int i = 0; i < 400 && !silent.sink->closed.has_value(); ++i) {
      std::this_thread::sleep_for(options_.heartbeat_interval);
      ASSERT_TRUE(coordinator_->OnHeartbeat(alive.id, alive.epoch, {}).ok());
      coordinator_->Tick();
    }
    ASSERT_TRUE(silent.sink->closed.has_value());
  }

  const WorkerView* FindWorker(const std::vector<WorkerView>& workers, const std::string& id) {
    for (const WorkerView& w : workers) {
      if (w.id == id) return &w;
    }
    return nullptr;
  }
};

TEST_F(CoordinatorQueueTest, JobSubmittedBeforeAnyWorkerWaitsAndRunsWhenWorkersArrive) {
  const std::string id = Submit(JobYaml(2, 2, ""));  // no worker yet: accepted
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_FALSE(Job(id).pending_code.has_value());  // no scheduling pass yet
  coordinator_->Tick();
  EXPECT_EQ(Job(id).pending_code, PendingCode::kExceedsRegistered);
  EXPECT_EQ(Job(id).record.state_reason,
            "waiting for workers to join: needs 4 slots (2 pipeline stages x 2 data-parallel); "
            "no worker is registered");

  Worker a = AddWorker("a", 2);
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_EQ(Job(id).pending_code, PendingCode::kExceedsRegistered);
  EXPECT_THAT(Job(id).record.state_reason, HasSubstr("; 1 worker ready with 2 slots, 2 free"));

  // Its session breaks: registered, but not ready.
  coordinator_->DetachSession(a.id, a.epoch, a.sink.get());
  coordinator_->Tick();
  EXPECT_THAT(Job(id).record.state_reason, HasSubstr("; no worker is ready (1 draining, 0 lost)"));

  a = AddWorker("a", 2);
  Worker b = AddWorker("b", 2);
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  EXPECT_FALSE(Job(id).pending_code.has_value());
  EXPECT_EQ(a.sink->assignments.size() + b.sink->assignments.size(), 2u);
}

TEST_F(CoordinatorQueueTest, JobWaitingForALostWorkerResumesWhenItReturns) {
  Worker a = AddWorker("a", 2);
  Worker b = AddWorker("b", 2);
  const std::string id = Submit(JobYaml(2, 2, "{max_restarts: 2}"));
  coordinator_->Tick();
  Running(a);
  Running(b);
  ASSERT_EQ(State(id), JobState::kRunning);

  LoseByLease(b, a);
  // a's ranks are told to stop; once they are gone the job waits for 4 slots again.
  ASSERT_FALSE(a.sink->cancellations.empty());
  Exit(a, 0, 15);
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_EQ(Job(id).record.last_recovery_cause, RecoveryCause::kWorkerLost);
  EXPECT_EQ(Job(id).pending_code, PendingCode::kExceedsRegistered);
  EXPECT_THAT(Job(id).record.state_reason,
              HasSubstr("waiting for workers to join: needs 4 slots (2 pipeline stages x 2 "
                        "data-parallel); 1 worker ready with 2 slots, 2 free (0 draining, 1 lost)"));

  // b comes back (its daemon registers again): the job starts its next attempt on both.
  Worker back = AddWorker("b", 2);
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  EXPECT_EQ(Job(id).record.attempt, 2);
  ASSERT_FALSE(back.sink->assignments.empty());
  EXPECT_EQ(back.sink->assignments.back().attempt, 2);
}

TEST_F(CoordinatorQueueTest, PendingCodesAreExportedAsMetrics) {
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> metrics = CoordinatorMetrics::Create("");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  metrics_ = metrics->get();
  Make();
  Worker a = AddWorker("a", 2);
  const std::string big = Submit(JobYaml(2, 2, ""));
  const std::string fits = Submit(JobYaml(1, 2, ""));
  const std::string waits = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  EXPECT_EQ(State(fits), JobState::kStarting);
  EXPECT_EQ(Job(big).pending_code, PendingCode::kExceedsRegistered);
  EXPECT_EQ(Job(waits).pending_code, PendingCode::kInsufficientSlots);
  const std::string text = (*metrics)->Serialize();
  EXPECT_THAT(text, HasSubstr("deepnet_jobs_pending{reason=\"exceeds_registered\"} 1"));
  EXPECT_THAT(text, HasSubstr("deepnet_jobs_pending{reason=\"insufficient_slots\"} 1"));
  EXPECT_THAT(text, HasSubstr("deepnet_jobs_pending{reason=\"behind_job\"} 0"));
  EXPECT_THAT(text, HasSubstr("deepnet_jobs_pending{reason=\"schedulable\"} 0"));
  ASSERT_TRUE(coordinator_->Cancel(big, "").ok());
  coordinator_->Tick();
  EXPECT_THAT((*metrics)->Serialize(),
              HasSubstr("deepnet_jobs_pending{reason=\"exceeds_registered\"} 0"));
  coordinator_.reset();  // before the metrics it reports to
}

TEST_F(CoordinatorQueueTest, WithoutClusterSlotsNoJobIsRefusedForItsSize) {
  EXPECT_TRUE(coordinator_->ParseSpec(JobYaml(2, 512, "")).ok());  // 1024 ranks, no worker
  AddWorker("a", 2);
  EXPECT_TRUE(coordinator_->ParseSpec(JobYaml(2, 2, "")).ok());
}

TEST_F(CoordinatorQueueTest, ClusterSlotsRefusesGangsLargerThanTheBound) {
  options_.cluster_slots = 4;
  Make();
  EXPECT_TRUE(coordinator_->ParseSpec(JobYaml(2, 2, "")).ok());  // no worker needed
  const absl::Status too_big = coordinator_->ParseSpec(JobYaml(2, 3, "")).status();
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(too_big.message(),
            "job spec: parallel.pipeline_stages x parallel.data_parallel = 2 x 3 = 6 ranks, but "
            "the cluster has only 4 slots in total (--cluster-slots): the job could never run");
  // The bound, not the registered workers, decides.
  AddWorker("a", 8);
  EXPECT_FALSE(coordinator_->ParseSpec(JobYaml(2, 3, "")).ok());
}

TEST_F(CoordinatorQueueTest, ListWorkersShowsStatesSlotsAndWhatHoldsThem) {
  Registration gpu;
  gpu.worker_name = "gpu";
  gpu.host.hostname = "node-7";
  gpu.host.memory_bytes = int64_t{64} << 30;
  gpu.host.gpu_names = {"NVIDIA H100", "NVIDIA H100"};
  gpu.slots = {{0, true, 0}, {1, true, 1}};
  const int64_t gpu_epoch = coordinator_->Register(gpu)->epoch;
  Worker a = AddWorker("a", 2);
  Worker b = AddWorker("b", 2);
  const std::string id = Submit(JobYaml(2, 1, ""));
  coordinator_->Tick();
  Worker& holder = a.sink->assignments.empty() ? b : a;
  Worker& idle = a.sink->assignments.empty() ? a : b;

  std::vector<WorkerView> workers = coordinator_->ListWorkers();
  ASSERT_EQ(workers.size(), 3u);
  EXPECT_EQ(workers[0].id, "a");  // by id
  const WorkerView* h = FindWorker(workers, holder.id);
  EXPECT_EQ(h->state, WorkerState::kReady);
  EXPECT_EQ(h->slots_used, 2);
  EXPECT_EQ(h->slots_free, 0);
  ASSERT_EQ(h->slots.size(), 2u);
  for (int slot = 0; slot < 2; ++slot) {
    ASSERT_TRUE(h->slots[slot].task.has_value());
    EXPECT_EQ(h->slots[slot].task->job_id, id);
    EXPECT_EQ(h->slots[slot].task->owner, "alice");
    EXPECT_EQ(h->slots[slot].task->attempt, 1);
    EXPECT_EQ(h->slots[slot].facts.index, slot);
  }
  EXPECT_NE(h->slots[0].task->rank, h->slots[1].task->rank);
  const WorkerView* i = FindWorker(workers, idle.id);
  EXPECT_EQ(i->slots_used, 0);
  EXPECT_EQ(i->slots_free, 2);
  EXPECT_FALSE(i->slots[0].used);
  const WorkerView* g = FindWorker(workers, "gpu");
  EXPECT_EQ(g->state, WorkerState::kDraining);  // registered, no session yet
  EXPECT_EQ(g->host.hostname, "node-7");
  EXPECT_TRUE(g->slots[1].facts.cuda);
  EXPECT_EQ(g->slots[1].facts.device_index, 1);
  EXPECT_EQ(g->slots_free, 2);

  // The idle worker and the GPU worker fall silent and are lost; the holder keeps reporting.
  ASSERT_TRUE(coordinator_->OnHeartbeat("gpu", gpu_epoch, {}).ok());
  Running(holder);
  LoseByLease(idle, holder);
  workers = coordinator_->ListWorkers();
  i = FindWorker(workers, idle.id);
  EXPECT_EQ(i->slots_free, 0);
  EXPECT_EQ(i->slots_used, 0);
  // Lost only after the lease: lease_heartbeats x heartbeat_interval without a word.
  EXPECT_GE(i->heartbeat_age_ms,
            options_.lease_heartbeats * options_.heartbeat_interval.count());
  EXPECT_LT(FindWorker(workers, holder.id)->heartbeat_age_ms, i->heartbeat_age_ms);
  EXPECT_EQ(FindWorker(workers, holder.id)->slots_used, 2);

  // The job ends: its slots are free again.
  Exit(holder, 0);
  ASSERT_EQ(State(id), JobState::kSucceeded);
  EXPECT_EQ(FindWorker(coordinator_->ListWorkers(), holder.id)->slots_free, 2);
}

}  // namespace
}  // namespace deepnet::coordinator
