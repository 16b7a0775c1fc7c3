// The coordinator core in process, without gRPC (docs/PERFORMANCE.md, "Coordinator core"):
// submit N jobs into an in-memory store, then drive the control loop as a busy cluster does and
// time each call. Uses only the Coordinator's public API, so the same file measures any two
// versions of the core side by side (bench/coordinator_core.sh).
//
//   deepnet_bench_coordinator_core --jobs 5000 --workers 64 --slots 8 --rounds 400
//
// Phases (each reported as p50/p99/mean microseconds per call, plus totals):
//   submit     - ParseSpec + Submit of `jobs` 2x2 jobs (the first fill the cluster, the rest queue)
//   heartbeat  - OnHeartbeat of every worker with its running tasks, `heartbeat_rounds` rounds
//   churn      - one running job's ranks exit cleanly (OnTrainerExit x4), then Tick(): the job
//                finishes, its slots are released and the scheduler places the next queued job
//                and recomputes every queued job's pending reason; `rounds` rounds
//   tick_idle  - Tick() with nothing to do, `rounds` rounds
//   restart    - Coordinator::Create over the store the run filled (loads every job)
// Prints one JSON object as its last line of standard output (the core logs as a daemon would,
// before it).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#if __has_include("coordinator/core/coordinator.h")
#include "coordinator/core/coordinator.h"
#include "coordinator/store/in_memory_job_store.h"
#else
#include "coordinator/coordinator.h"
#include "coordinator/in_memory_job_store.h"
#endif

namespace deepnet::coordinator {
namespace {

using Clock = std::chrono::steady_clock;

// Records what the core sends to one worker; the bench plays the worker's part.
class RecordingSink : public WorkerCommandSink {
 public:
  void SendAssignment(int64_t, const AssignmentCommand& command) override {
    assignments.push_back(command);
  }
  void SendCancellation(int64_t, const CancellationCommand&) override {}
  void SendLease(int64_t, int64_t, int64_t) override {}
  void Close(const absl::Status&) override {}
  std::vector<AssignmentCommand> assignments;
};

struct BenchWorker {
  std::string id;
  int64_t epoch = 0;
  std::shared_ptr<RecordingSink> sink;
  size_t seen = 0;  // assignments already moved into `running`
};

// A running attempt: which worker holds which of its ranks.
struct RunningJob {
  std::string job_id;
  int attempt = 0;
  std::vector<std::pair<size_t, int>> ranks;  // (worker index, rank)
};

struct Timings {
  std::vector<double> us;
  void Add(Clock::time_point start) {
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  nlohmann::json Summary() {
    nlohmann::json out;
    if (us.empty()) return out;
    std::vector<double> sorted = us;
    std::sort(sorted.begin(), sorted.end());
    double total = 0;
    for (double v : sorted) total += v;
    out["calls"] = sorted.size();
    out["p50_us"] = sorted[sorted.size() / 2];
    out["p99_us"] = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
    out["mean_us"] = total / static_cast<double>(sorted.size());
    out["total_ms"] = total / 1000.0;
    return out;
  }
};

std::string JobYaml(int64_t n) {
  return absl::StrCat("name: bench-", n,
                      "\nmodel: {encoder_layers: 2, decoder_layers: 2, d_model: 16, heads: 2, "
                      "ffn_dim: 32}\ntrain: {max_steps: 10}\n"
                      "parallel: {pipeline_stages: 2, data_parallel: 2}\n");
}

CoordinatorOptions BenchOptions() {
  CoordinatorOptions options;
  options.rendezvous_address = "127.0.0.1:1";
  options.spec_check.check_paths = false;
  // Leases never expire during the run: the bench measures calls, not timeouts.
  options.heartbeat_interval = std::chrono::milliseconds(60000);
  return options;
}

// Moves new assignments of every worker into `running` (one entry per job attempt).
void CollectAssignments(std::vector<BenchWorker>& workers,
                        std::map<std::string, RunningJob>& running) {
  for (size_t w = 0; w < workers.size(); ++w) {
    BenchWorker& worker = workers[w];
    for (; worker.seen < worker.sink->assignments.size(); ++worker.seen) {
      const AssignmentCommand& a = worker.sink->assignments[worker.seen];
      RunningJob& job = running[a.job_id];
      if (job.attempt != a.attempt) job = RunningJob{a.job_id, a.attempt, {}};
      for (const RankAssignmentData& r : a.ranks) job.ranks.emplace_back(w, r.rank);
    }
  }
}

std::vector<TaskReport> TasksOf(size_t worker, const std::map<std::string, RunningJob>& running) {
  std::vector<TaskReport> tasks;
  for (const auto& [id, job] : running) {
    for (const auto& [w, rank] : job.ranks) {
      if (w != worker) continue;
      TaskReport task;
      task.job_id = id;
      task.attempt = job.attempt;
      task.rank = rank;
      task.phase = TaskPhase::kRunning;
      task.pid = 1000 + rank;
      task.step = 5;
      task.slot_index = 0;
      tasks.push_back(task);
    }
  }
  return tasks;
}

int Run(int64_t jobs, int worker_count, int slots, int rounds, int heartbeat_rounds) {
  InMemoryJobStore store;
  std::unique_ptr<WorkerEpochStore> epochs = *WorkerEpochStore::Open("");
  RendezvousStore rendezvous;
  const CoordinatorOptions options = BenchOptions();
  absl::StatusOr<std::unique_ptr<Coordinator>> created =
      Coordinator::Create(options, &store, epochs.get(), &rendezvous, nullptr);
  if (!created.ok()) {
    std::fprintf(stderr, "Create: %s\n", created.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Coordinator> coordinator = std::move(*created);

  std::vector<BenchWorker> workers;
  for (int w = 0; w < worker_count; ++w) {
    Registration reg;
    reg.worker_name = absl::StrCat("bench-worker-", w);
    for (int s = 0; s < slots; ++s) reg.slots.push_back({s, false, -1, 0});
    absl::StatusOr<RegistrationResult> r = coordinator->Register(reg);
    if (!r.ok()) return 1;
    BenchWorker worker{reg.worker_name, r->epoch, std::make_shared<RecordingSink>(), 0};
    if (!coordinator->AttachSession(worker.id, worker.epoch, r->session_secret, worker.sink).ok()) return 1;
    workers.push_back(std::move(worker));
  }

  nlohmann::json out;
  out["jobs"] = jobs;
  out["workers"] = worker_count;
  out["slots_per_worker"] = slots;

  Timings submit;
  for (int64_t n = 0; n < jobs; ++n) {
    const std::string yaml = JobYaml(n);
    const Clock::time_point start = Clock::now();
    absl::StatusOr<JobSpecInfo> spec = coordinator->ParseSpec(yaml);
    if (!spec.ok()) return 1;
    SubmitRequestData request;
    request.owner = absl::StrCat("user-", n % 16);
    request.config_yaml = yaml;
    request.spec = *spec;
    if (!coordinator->Submit(request).ok()) return 1;
    submit.Add(start);
  }
  out["submit"] = submit.Summary();

  std::map<std::string, RunningJob> running;
  coordinator->Tick();  // the first pass fills the cluster
  CollectAssignments(workers, running);
  for (size_t w = 0; w < workers.size(); ++w) {
    (void)coordinator->OnHeartbeat(workers[w].id, workers[w].epoch, TasksOf(w, running));
  }
  out["running_after_fill"] = running.size();

  Timings heartbeat;
  for (int round = 0; round < heartbeat_rounds; ++round) {
    for (size_t w = 0; w < workers.size(); ++w) {
      const std::vector<TaskReport> tasks = TasksOf(w, running);
      const Clock::time_point start = Clock::now();
      if (!coordinator->OnHeartbeat(workers[w].id, workers[w].epoch, tasks).ok()) return 1;
      heartbeat.Add(start);
    }
  }
  out["heartbeat"] = heartbeat.Summary();

  Timings churn;
  int finished = 0;
  for (int round = 0; round < rounds && !running.empty(); ++round) {
    const RunningJob job = running.begin()->second;
    running.erase(running.begin());
    const Clock::time_point start = Clock::now();
    for (const auto& [w, rank] : job.ranks) {
      TrainerExitReport exit;
      exit.job_id = job.job_id;
      exit.attempt = job.attempt;
      exit.rank = rank;
      exit.exit_code = 0;
      exit.message = "done";
      (void)coordinator->OnTrainerExit(workers[w].id, workers[w].epoch, exit);
    }
    coordinator->Tick();
    churn.Add(start);
    ++finished;
    // The workers report the newly placed ranks running (not timed).
    std::map<std::string, RunningJob> before = running;
    CollectAssignments(workers, running);
    for (const auto& [id, placed] : running) {
      if (before.count(id) != 0) continue;
      for (size_t w = 0; w < workers.size(); ++w) {
        bool holds = false;
        for (const auto& [pw, rank] : placed.ranks) holds = holds || pw == w;
        if (holds) (void)coordinator->OnHeartbeat(workers[w].id, workers[w].epoch, TasksOf(w, running));
      }
    }
  }
  out["churn"] = churn.Summary();
  out["finished"] = finished;

  Timings idle;
  for (int round = 0; round < rounds; ++round) {
    const Clock::time_point start = Clock::now();
    coordinator->Tick();
    idle.Add(start);
  }
  out["tick_idle"] = idle.Summary();

  // Restart: a new core over the same store (the old one first, as a daemon restart would).
  coordinator->Shutdown();
  coordinator.reset();
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<Coordinator>> second =
      Coordinator::Create(options, &store, epochs.get(), &rendezvous, nullptr);
  if (!second.ok()) return 1;
  Timings restart;
  restart.Add(start);
  out["restart"] = restart.Summary();
  (*second)->Shutdown();

  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace deepnet::coordinator

int main(int argc, char** argv) {
  CLI::App app{"Coordinator core: submit, heartbeats, churn and ticks over many jobs, in process"};
  int64_t jobs = 5000;
  int workers = 64;
  int slots = 8;
  int rounds = 400;
  int heartbeat_rounds = 20;
  app.add_option("--jobs", jobs, "jobs submitted (2x2 each)")->check(CLI::Range(1, 1000000));
  app.add_option("--workers", workers, "simulated workers")->check(CLI::Range(1, 100000));
  app.add_option("--slots", slots, "slots per worker")->check(CLI::Range(1, 1024));
  app.add_option("--rounds", rounds, "churn and idle tick rounds")->check(CLI::Range(0, 1000000));
  app.add_option("--heartbeat-rounds", heartbeat_rounds, "heartbeat rounds over every worker")
      ->check(CLI::Range(0, 1000000));
  CLI11_PARSE(app, argc, argv);
  return deepnet::coordinator::Run(jobs, workers, slots, rounds, heartbeat_rounds);
}
