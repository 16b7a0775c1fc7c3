// Job store latency: Create (with an idempotency key), Transition, Get and a 100-job List page
// on SqliteJobStore (WAL, synchronous=FULL: each write waits for fsync) and, for comparison,
// InMemoryJobStore. Prints one JSON object; numbers go to docs/PERFORMANCE.md, never to tests.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "coordinator/store/in_memory_job_store.h"
#include "coordinator/store/sqlite_job_store.h"

namespace {

using deepnet::coordinator::JobRecord;
using deepnet::coordinator::JobState;
using deepnet::coordinator::JobStore;

// Runs `op` n times; returns p50/p99/max in microseconds, or exits on the first error.
nlohmann::json Measure(int n, const std::function<bool(int)>& op) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (!op(i)) std::exit(1);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                           start)
                     .count());
  }
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[static_cast<size_t>(q * (us.size() - 1))]; };
  return {{"n", n}, {"p50_us", at(0.5)}, {"p99_us", at(0.99)}, {"max_us", us.back()}};
}

nlohmann::json Run(JobStore& store, int n) {
  JobRecord request;
  request.owner = "bench";
  request.name = "bench";
  request.spec_yaml = std::string(2048, 'y');  // About the size of a real job spec.
  request.pipeline_stages = 2;
  request.data_parallel = 2;
  std::vector<std::string> ids;
  nlohmann::json result;
  result["create"] = Measure(n, [&](int i) {
    request.idempotency_key = absl::StrCat("key-", i);
    auto created = store.Create(request);
    if (!created.ok()) std::cerr << created.status() << "\n";
    if (created.ok()) ids.push_back(created->record.id);
    return created.ok();
  });
  result["transition"] = Measure(n, [&](int i) {
    auto moved = store.Transition(ids[static_cast<size_t>(i)],
                                  {JobState::kQueued, JobState::kPlacing, "", {}, {}});
    if (!moved.ok()) std::cerr << moved.status() << "\n";
    return moved.ok();
  });
  result["get"] = Measure(n, [&](int i) { return store.Get(ids[static_cast<size_t>(i)]).ok(); });
  result["list_page_100"] = Measure(std::max(1, n / 10), [&](int) {
    return store.List({"bench", {JobState::kPlacing}}, 100, "").ok();
  });
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Job store latency benchmark"};
  int n = 2000;
  std::string dir = std::filesystem::temp_directory_path().string();
  app.add_option("--n", n, "Operations of each kind")->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "Folder for the database file (the disk being measured)");
  CLI11_PARSE(app, argc, argv);

  const std::string path = absl::StrCat(dir, "/job_store_bench_", ::getpid(), ".db");
  nlohmann::json report;
  report["path"] = path;
  {
    deepnet::coordinator::JobStoreOptions options;
    options.path = path;
    auto store = deepnet::coordinator::SqliteJobStore::Open(options);
    if (!store.ok()) {
      std::cerr << store.status() << "\n";
      return 1;
    }
    report["sqlite_wal_full"] = Run(**store, n);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  deepnet::coordinator::InMemoryJobStore memory;
  report["in_memory"] = Run(memory, n);
  std::cout << report.dump(2) << std::endl;
  return 0;
}
