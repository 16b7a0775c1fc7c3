// Heartbeats: a real deepnet-coordinator and N simulated workers (one connection and one Session
// stream each, all in this process on gRPC's callback API) heartbeating every interval with
// evenly spread phases. Measures heartbeat -> lease latency, the coordinator's CPU and memory,
// this process's CPU (both share the machine), an empty unary round trip on the idle and on the
// loaded coordinator (the reference), and whether the coordinator counted any worker as lost.
#include <atomic>
#include <iostream>
#include <thread>

#include "bench/control_plane_benches.h"
#include "bench/control_plane_util.h"
#include "bench/fake_worker.h"

namespace deepnet::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<double> ProbeMany(UnaryProbe& probe, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    const double ms = probe.RoundTripMs();
    if (ms >= 0) out.push_back(ms);
  }
  return out;
}

nlohmann::json CoordinatorGauges(const CoordinatorProcess& coordinator) {
  const std::string page = coordinator.Metrics();
  return {{"workers_ready", PrometheusValue(page, "deepnet_workers{state=\"ready\"}")},
          {"workers_lost", PrometheusValue(page, "deepnet_workers{state=\"lost\"}")},
          {"heartbeats_missed_total",
           PrometheusValue(page, "deepnet_worker_heartbeats_missed_total")}};
}

}  // namespace

int RunHeartbeats(const Binaries& binaries, const HeartbeatOptions& options) {
  TempDir dir("deepnet-bench-heartbeats");
  CoordinatorProcess coordinator(binaries.coordinator, dir.path());
  if (!coordinator.Start({"--no-check-paths", "--heartbeat-interval-ms",
                          std::to_string(options.heartbeat_ms)})) {
    return 1;
  }
  nlohmann::json report;
  report["workers"] = options.workers;
  report["heartbeat_ms"] = options.heartbeat_ms;
  report["duration_s"] = options.duration_s;
  UnaryProbe probe(coordinator.address());
  ProbeMany(probe, 20);  // connect and warm up
  report["unary_idle"] = Summary(ProbeMany(probe, options.reference_calls));
  report["coordinator_rss_idle_bytes"] = RssBytes(coordinator.pid());

  // The simulated workers, each with a connection of its own.
  const int n = options.workers;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs;
  std::vector<std::unique_ptr<FakeWorker>> workers;
  for (int i = 0; i < n; ++i) {
    channels.push_back(OwnChannel(coordinator.address()));
    stubs.push_back(v1::WorkerService::NewStub(channels.back()));
    workers.push_back(std::make_unique<FakeWorker>("sim-" + std::to_string(i), 1));
  }
  // One driver thread sends every heartbeat, worker i at phase i/n of the interval, once its
  // session is open. Workers register (each registration persists an epoch: one fsync) and open
  // their session at once, as deepnet-worker does, from 4 threads.
  std::atomic<bool> stop{false};
  std::unique_ptr<std::atomic<bool>[]> open(new std::atomic<bool>[n]());
  const auto interval = std::chrono::milliseconds(options.heartbeat_ms);
  std::thread driver([&] {
    const Clock::time_point start = Clock::now();
    for (int64_t round = 0; !stop; ++round) {
      for (int i = 0; i < n && !stop; ++i) {
        std::this_thread::sleep_until(start + interval * round + interval * i / n);
        if (open[i]) workers[i]->SendHeartbeat({});
      }
    }
  });
  const Clock::time_point register_start = Clock::now();
  std::atomic<bool> register_failed{false};
  std::vector<std::thread> registrars;
  for (int t = 0; t < 4; ++t) {
    registrars.emplace_back([&, t] {
      for (int i = t; i < n; i += 4) {
        if (!workers[i]->Register(*stubs[i])) {
          register_failed = true;
          continue;
        }
        workers[i]->OpenSession(*stubs[i]);
        open[i] = true;
      }
    });
  }
  for (std::thread& t : registrars) t.join();
  report["register_all_s"] =
      std::chrono::duration<double>(Clock::now() - register_start).count();
  if (register_failed) {
    stop = true;
    driver.join();
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(options.warmup_s));
  for (auto& w : workers) w->TakeLatencies();
  const nlohmann::json before = CoordinatorGauges(coordinator);

  // The steady window.
  CpuMeter coordinator_cpu(coordinator.pid());
  CpuMeter self_cpu(0);
  std::vector<double> probe_loaded;
  std::thread prober([&] {
    const auto period = std::chrono::duration<double>(1.0 / options.probe_hz);
    const Clock::time_point start = Clock::now();
    for (int64_t k = 1; !stop; ++k) {
      const double ms = probe.RoundTripMs();
      if (ms >= 0) probe_loaded.push_back(ms);
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(period * k));
    }
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(options.duration_s));
  report["coordinator_cpu_percent_of_core"] = coordinator_cpu.Percent();
  report["bench_cpu_percent_of_core"] = self_cpu.Percent();
  std::vector<double> latencies;
  for (auto& w : workers) {
    std::vector<double> l = w->TakeLatencies();
    latencies.insert(latencies.end(), l.begin(), l.end());
  }
  report["coordinator_rss_bytes"] = RssBytes(coordinator.pid());
  report["coordinator_peak_rss_bytes"] = PeakRssBytes(coordinator.pid());
  stop = true;
  driver.join();
  prober.join();

  report["heartbeat_latency"] = Summary(latencies);
  report["heartbeats_expected"] =
      static_cast<int64_t>(options.workers * options.duration_s * 1000 / options.heartbeat_ms);
  report["unary_loaded"] = Summary(probe_loaded);
  const double hb_p50 = report["heartbeat_latency"].value("p50_ms", -1.0);
  const double idle_p50 = report["unary_idle"].value("p50_ms", -1.0);
  const double loaded_p50 = report["unary_loaded"].value("p50_ms", -1.0);
  if (idle_p50 > 0) report["heartbeat_p50_over_unary_idle_p50"] = hb_p50 / idle_p50;
  if (loaded_p50 > 0) report["heartbeat_p50_over_unary_loaded_p50"] = hb_p50 / loaded_p50;
  report["gauges_before_window"] = before;
  report["gauges_after_window"] = CoordinatorGauges(coordinator);
  report["heartbeats_missed_in_window"] =
      report["gauges_after_window"]["heartbeats_missed_total"].get<double>() -
      before["heartbeats_missed_total"].get<double>();
  int ended = 0;
  int64_t queued = 0;
  std::string example;
  for (auto& w : workers) {
    queued += w->queued_behind();
    if (w->ended_early()) {
      ++ended;
      if (example.empty()) example = w->worker_id();
    }
  }
  report["sessions_ended_by_coordinator"] = ended;
  if (!example.empty()) report["first_ended_session"] = example;
  report["heartbeats_queued_behind_a_write"] = queued;
  for (auto& w : workers) w->Close(std::chrono::seconds(5));
  std::cout << report.dump(2) << std::endl;
  return 0;
}

}  // namespace deepnet::bench
