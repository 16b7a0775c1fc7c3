// SubmitJob: latency of sequential submits of a small valid job (with an idempotency key, as
// deepnetctl sends) to a real deepnet-coordinator with no workers (the jobs queue), then
// throughput with concurrent clients. Reference, in the same run and on the same disk: the bare
// SqliteJobStore::Create the submit performs, in process, and an empty unary round trip.
#include <atomic>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/control_plane_benches.h"
#include "bench/control_plane_util.h"
#include "coordinator/store/sqlite_job_store.h"
#include "deepnet/v1/job_service.grpc.pb.h"

namespace deepnet::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string SmallJob(const std::string& dir) {
  return "name: submit-bench\n"
         "model: {encoder_layers: 2, decoder_layers: 2, d_model: 32, heads: 2, ffn_dim: 64, "
         "max_positions: 128, dropout: 0.0}\n"
         "data: {synthetic: {languages: [rev, cp], pairs_per_language: 200, max_words: 5}, "
         "max_tokens: 160, max_len: 64, prefetch: 2}\n"
         "optim: {lr: 2.0e-3, warmup_steps: 5}\n"
         "train: {max_steps: 40, log_every: 1, probe_every: 5, seed: 3}\n"
         "checkpoint: {dir: " + dir + "/ckpt, every_steps: 5, keep_last: 0}\n"
         "runtime: {blas_threads: 1}\n"
         "parallel: {pipeline_stages: 1, data_parallel: 1, backend: gloo, timeout_s: 60}\n"
         "scheduling: {max_restarts: 2}\n";
}

// Submits `count` jobs with keys prefix-K from one client; latencies in ms; false on an error.
bool SubmitMany(const std::string& address, const std::string& yaml, const std::string& prefix,
                int count, std::vector<double>* latencies) {
  auto stub = v1::JobService::NewStub(OwnChannel(address));
  for (int i = 0; i < count; ++i) {
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(yaml);
    request.set_idempotency_key(absl::StrCat(prefix, "-", i));
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const Clock::time_point start = Clock::now();
    const grpc::Status status = stub->SubmitJob(&context, request, &response);
    latencies->push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!status.ok() || !response.created()) {
      std::cerr << "SubmitJob: " << status.error_code() << " " << status.error_message() << "\n";
      return false;
    }
  }
  return true;
}

nlohmann::json Concurrent(const std::string& address, const std::string& yaml, int clients,
                          int jobs, bool* ok) {
  std::vector<std::vector<double>> per_client(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  std::atomic<bool> failed{false};
  const Clock::time_point start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      const int mine = jobs / clients + (c < jobs % clients ? 1 : 0);
      if (!SubmitMany(address, yaml, absl::StrCat("c", clients, "-", c), mine, &per_client[c])) {
        failed = true;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (const auto& v : per_client) all.insert(all.end(), v.begin(), v.end());
  nlohmann::json out = Summary(all);
  out["clients"] = clients;
  out["jobs_per_s"] = jobs / wall;
  *ok = !failed;
  return out;
}

}  // namespace

int RunSubmit(const Binaries& binaries, const SubmitOptions& options) {
  TempDir dir("deepnet-bench-submit");
  const std::string yaml = SmallJob(dir.path());
  nlohmann::json report;
  report["jobs"] = options.jobs;
  report["spec_bytes"] = yaml.size();

  // Reference: the store write alone, in process, on the same disk.
  {
    coordinator::JobStoreOptions store_options;
    store_options.path = dir.path() + "/reference.db";
    auto store = coordinator::SqliteJobStore::Open(store_options);
    if (!store.ok()) {
      std::cerr << store.status() << "\n";
      return 1;
    }
    coordinator::JobRecord record;
    record.owner = "anonymous";
    record.name = "submit-bench";
    record.spec_yaml = yaml;
    record.pipeline_stages = 1;
    record.data_parallel = 1;
    record.max_restarts = 2;
    std::vector<double> create;
    for (int i = 0; i < options.jobs; ++i) {
      record.idempotency_key = absl::StrCat("ref-", i);
      const Clock::time_point start = Clock::now();
      auto created = (*store)->Create(record);
      create.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      if (!created.ok()) {
        std::cerr << created.status() << "\n";
        return 1;
      }
    }
    report["store_create_reference"] = Summary(create);
  }

  CoordinatorProcess coordinator(binaries.coordinator, dir.path());
  if (!coordinator.Start({"--no-check-paths"})) return 1;
  UnaryProbe probe(coordinator.address());
  std::vector<double> unary;
  for (int i = 0; i < options.jobs; ++i) {
    const double ms = probe.RoundTripMs();
    if (ms >= 0 && i >= 20) unary.push_back(ms);
  }
  report["unary_reference"] = Summary(unary);

  std::vector<double> sequential;
  CpuMeter cpu(coordinator.pid());
  const Clock::time_point start = Clock::now();
  if (!SubmitMany(coordinator.address(), yaml, "seq", options.jobs, &sequential)) return 1;
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  report["coordinator_cpu_percent_of_core_sequential"] = cpu.Percent();
  report["sequential"] = Summary(sequential);
  report["sequential"]["jobs_per_s"] = options.jobs / wall;
  const double ref = report["store_create_reference"]["p50_ms"].get<double>();
  report["submit_p50_over_store_create_p50"] = report["sequential"]["p50_ms"].get<double>() / ref;
  bool ok = true;
  report["concurrent_a"] =
      Concurrent(coordinator.address(), yaml, options.concurrency_a, options.jobs, &ok);
  if (ok) {
    report["concurrent_b"] =
        Concurrent(coordinator.address(), yaml, options.concurrency_b, options.jobs, &ok);
  }
  if (!ok) return 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // gauges update every tick
  const std::string page = coordinator.Metrics();
  report["jobs_queued_at_end"] = PrometheusValue(page, "deepnet_jobs{state=\"queued\"}");
  report["coordinator_rss_bytes"] = RssBytes(coordinator.pid());
  report["scheduler_decisions"] = PrometheusValue(page, "deepnet_scheduler_decision_seconds_count");
  report["scheduler_decision_seconds_sum"] =
      PrometheusValue(page, "deepnet_scheduler_decision_seconds_sum");
  std::cout << report.dump(2) << std::endl;
  return 0;
}

}  // namespace deepnet::bench
