// Prints every coordinator metric, each populated, in the Prometheus text format: the input of
// the CoordinatorMetrics.PromtoolCheck test (`promtool check metrics`).
#include <cstdio>
#include <iostream>

#include "coordinator/core/coordinator_metrics.h"

int main() {
  using namespace deepnet::coordinator;
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> metrics = CoordinatorMetrics::Create("");
  if (!metrics.ok()) {
    std::fprintf(stderr, "coordinator_metrics_dump: %s\n", metrics.status().ToString().c_str());
    return 1;
  }
  CoordinatorMetrics& m = **metrics;
  m.SetJobsByState({{JobState::kQueued, 3}, {JobState::kRunning, 2}, {JobState::kFailed, 1}});
  m.SetWorkersByState({{WorkerState::kReady, 2}, {WorkerState::kLost, 1}});
  m.SetJobsPending({{PendingCode::kInsufficientSlots, 2}, {PendingCode::kExceedsRegistered, 1}});
  m.ObserveQueueWait(42.5);
  m.ObserveTimeToRunning(61.0);
  m.ObserveSchedulingDecision(0.0031);
  m.IncHeartbeatsMissed(3);
  m.IncRestarts(RecoveryCause::kWorkerExit);
  m.IncRestarts(RecoveryCause::kHang);
  m.IncJobsSubmitted();
  TrainingSample sample;
  sample.step = 1200;
  sample.loss = 2.75;
  sample.tokens_per_s = 15320.5;
  sample.lr = 3e-4;
  sample.grad_norm = 0.84;
  sample.update_norm = 0.012;
  sample.memory_bytes = int64_t{6} << 30;
  m.SetJobTraining("j-000001", sample);
  sample.update_norm.reset();
  m.SetJobTraining("j-000002", sample);
  std::cout << m.Serialize();
  return std::cout.good() ? 0 : 1;
}
