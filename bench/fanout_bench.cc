// StreamMetrics fan-out: a real deepnet-coordinator, one simulated worker that holds a RUNNING
// 1-rank job (it answers the Assignment by heartbeating the task RUNNING) and reports one metric
// point per MetricReport at a fixed rate, and W live StreamMetrics watchers (callback API, one
// connection each). Delivery latency = the worker's StartWrite of the report -> a watcher's
// receipt of the point (both in this process, steady clock); every watcher must get every point.
#include <google/protobuf/util/time_util.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "bench/control_plane_benches.h"
#include "bench/control_plane_util.h"
#include "bench/fake_worker.h"
#include "deepnet/v1/job_service.grpc.pb.h"
#include "tests/integration/service_cluster.h"

namespace deepnet::bench {
namespace {

using Clock = std::chrono::steady_clock;

int64_t Nanos(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// One StreamMetrics(live_only) client. Reactions run serially; the bench polls the per-step
// counters (atomics) while it runs and reads the latencies only after Stop().
class Watcher final : public grpc::ClientReadReactor<v1::StreamMetricsResponse> {
 public:
  Watcher(v1::JobService::Stub& stub, const std::string& job_id,
          const std::vector<std::atomic<int64_t>>& sent_ns)
      : sent_ns_(sent_ns), size_(sent_ns.size()), seen_(new std::atomic<int>[sent_ns.size()]()) {
    v1::StreamMetricsRequest request;
    request.set_job_id(job_id);
    request.set_live_only(true);
    stub.async()->StreamMetrics(&context_, &request, this);
    StartRead(&response_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    const int64_t now = Nanos(Clock::now());
    for (const v1::MetricPoint& p : response_.points()) {
      const auto step = static_cast<size_t>(p.step());
      if (step >= size_) continue;
      ++seen_[step];
      const int64_t sent = sent_ns_[step].load();
      if (sent > 0) latencies_ms_.push_back(static_cast<double>(now - sent) / 1e6);
    }
    got_any_ = true;
    StartRead(&response_);
  }
  void OnDone(const grpc::Status&) override {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  void Stop() {
    context_.TryCancel();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return done_; });
  }
  bool got_any() const { return got_any_; }
  // Points of steps [first, last] received exactly once; racy before Stop(), fine for polling.
  int64_t Complete(int64_t first, int64_t last) const {
    int64_t n = 0;
    for (int64_t s = first; s <= last; ++s) n += seen_[static_cast<size_t>(s)] == 1 ? 1 : 0;
    return n;
  }
  int64_t Duplicates() const {
    int64_t n = 0;
    for (size_t s = 0; s < size_; ++s) n += seen_[s] > 1 ? seen_[s] - 1 : 0;
    return n;
  }
  const std::vector<double>& latencies_ms() const { return latencies_ms_; }

 private:
  const std::vector<std::atomic<int64_t>>& sent_ns_;
  grpc::ClientContext context_;
  v1::StreamMetricsResponse response_;
  const size_t size_;
  std::unique_ptr<std::atomic<int>[]> seen_;  // per step: times received
  std::vector<double> latencies_ms_;
  std::atomic<bool> got_any_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace

int RunFanout(const Binaries& binaries, const FanoutOptions& options) {
  TempDir dir("deepnet-bench-fanout");
  CoordinatorProcess coordinator(binaries.coordinator, dir.path());
  if (!coordinator.Start({"--no-check-paths"})) return 1;
  auto channel = OwnChannel(coordinator.address());
  auto workers = v1::WorkerService::NewStub(channel);
  auto jobs = v1::JobService::NewStub(channel);

  // The worker: runs whatever it is assigned (reports it RUNNING), heartbeats every second.
  std::mutex task_mu;
  std::vector<v1::TaskStatus> tasks;
  auto worker = std::make_unique<FakeWorker>("fanout-worker", 1);
  if (!worker->Register(*workers)) return 1;
  worker->OpenSession(*workers, [&](FakeWorker& w, const v1::CoordinatorMessage& m) {
    if (!m.has_assignment()) return;
    std::vector<v1::TaskStatus> now;
    for (const v1::RankAssignment& r : m.assignment().ranks()) {
      v1::TaskStatus t;
      t.set_job_id(m.assignment().job_id());
      t.set_attempt(m.assignment().attempt());
      t.set_rank(r.rank());
      t.set_state(v1::TASK_STATE_RUNNING);
      t.set_pid(4242);
      t.set_slot_index(r.slot_index());
      now.push_back(t);
    }
    {
      std::lock_guard<std::mutex> lock(task_mu);
      tasks = now;
    }
    w.SendCommandResult(m.sequence(), true);
    w.SendHeartbeat(now);
  });
  std::atomic<bool> stop{false};
  std::thread heartbeats([&] {
    while (!stop) {
      std::vector<v1::TaskStatus> now;
      {
        std::lock_guard<std::mutex> lock(task_mu);
        now = tasks;
      }
      worker->SendHeartbeat(now);
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  auto fail = [&](const std::string& why) {
    std::cerr << why << "\ncoordinator log:\n" << coordinator.LogTail(3000) << "\n";
    stop = true;
    heartbeats.join();
    return 1;
  };

  // A 1x1 job, RUNNING on the fake worker.
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_config_yaml(
      "name: fanout\n"
      "model: {encoder_layers: 2, decoder_layers: 2, d_model: 32, heads: 2, ffn_dim: 64}\n"
      "data: {synthetic: {languages: [rev], pairs_per_language: 100, max_words: 5}}\n"
      "train: {max_steps: 1000000, log_every: 1}\n"
      "parallel: {pipeline_stages: 1, data_parallel: 1}\n");
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status s = jobs->SubmitJob(&context, submit, &submitted);
    if (!s.ok()) return fail("SubmitJob: " + s.error_message());
  }
  const std::string job_id = submitted.job().job_id();
  v1::Job job;
  const bool running = testing::WaitFor(
      [&] {
        v1::GetJobRequest get;
        get.set_job_id(job_id);
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        return jobs->GetJob(&context, get, &job).ok() && job.state() == v1::JOB_STATE_RUNNING;
      },
      std::chrono::seconds(60));
  if (!running) return fail("job " + job_id + " never reached RUNNING: " + job.DebugString());

  const int64_t points = static_cast<int64_t>(options.points_per_s * options.duration_s);
  const int64_t warmup_steps = 1000;  // warm-up points use steps 1..; measured ones follow
  std::vector<std::atomic<int64_t>> sent_ns(static_cast<size_t>(warmup_steps + points + 1));
  for (auto& s : sent_ns) s = 0;
  int64_t step = 0;
  auto report = [&](bool measured) {
    ++step;
    v1::MetricReport r;
    r.set_job_id(job_id);
    r.set_attempt(job.attempt());
    r.set_rank(0);
    v1::MetricPoint* p = r.add_points();
    p->set_step(step);
    p->set_loss(1.0);
    p->set_attempt(job.attempt());
    *p->mutable_time() = google::protobuf::util::TimeUtil::GetCurrentTime();
    if (measured) sent_ns[static_cast<size_t>(step)] = Nanos(Clock::now());
    worker->SendMetrics(r);
  };

  std::vector<std::unique_ptr<v1::JobService::Stub>> watcher_stubs;
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < options.watchers; ++i) {
    watcher_stubs.push_back(v1::JobService::NewStub(OwnChannel(coordinator.address())));
    watchers.push_back(std::make_unique<Watcher>(*watcher_stubs.back(), job_id, sent_ns));
  }
  // Warm up until every watcher's live stream delivers (so none misses a measured point).
  const bool all_live = testing::WaitFor(
      [&] {
        if (step < warmup_steps - 1) report(false);
        for (const auto& w : watchers) {
          if (!w->got_any()) return false;
        }
        return true;
      },
      std::chrono::seconds(60));
  if (!all_live) return fail("not every watcher received a point within 60 s");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  step = warmup_steps;

  CpuMeter coordinator_cpu(coordinator.pid());
  CpuMeter self_cpu(0);
  const Clock::time_point start = Clock::now();
  const auto period = std::chrono::duration<double>(1.0 / options.points_per_s);
  for (int64_t k = 0; k < points; ++k) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(period * k));
    report(true);
  }
  const int64_t first = warmup_steps + 1, last = warmup_steps + points;
  testing::WaitFor(
      [&] {
        for (const auto& w : watchers) {
          if (w->Complete(first, last) < points) return false;
        }
        return true;
      },
      std::chrono::seconds(10));
  nlohmann::json out;
  out["coordinator_cpu_percent_of_core"] = coordinator_cpu.Percent();
  out["bench_cpu_percent_of_core"] = self_cpu.Percent();
  out["coordinator_rss_bytes"] = RssBytes(coordinator.pid());
  for (auto& w : watchers) w->Stop();
  stop = true;
  heartbeats.join();
  worker->Close(std::chrono::seconds(5));

  std::vector<double> latencies;
  int64_t complete_watchers = 0, missing = 0, duplicates = 0;
  for (const auto& w : watchers) {
    latencies.insert(latencies.end(), w->latencies_ms().begin(), w->latencies_ms().end());
    const int64_t got = w->Complete(first, last);
    complete_watchers += got == points ? 1 : 0;
    missing += points - got;
    duplicates += w->Duplicates();
  }
  out["watchers"] = options.watchers;
  out["points"] = points;
  out["points_per_s"] = options.points_per_s;
  out["delivery_latency"] = Summary(latencies);
  out["watchers_with_every_point"] = complete_watchers;
  out["points_missing"] = missing;
  out["points_duplicated"] = duplicates;
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace deepnet::bench
