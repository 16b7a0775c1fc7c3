#pragma once
// Helpers of the control-plane benchmarks (bench/control_plane_bench.cc): a deepnet-coordinator
// child process on loopback ports chosen at run time, CPU and memory of a process from /proc,
// latency summaries, a counter read from a Prometheus text page, and channels that do not share
// a connection. Benchmarks only: numbers go to docs/PERFORMANCE.md, never to tests.
#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rpc/health_check_client.h"
#include "tests/integration/child_process.h"

namespace deepnet::bench {

// p50/p99/max/mean (and n) of `samples` (milliseconds), as JSON; {"n": 0} when empty.
nlohmann::json Summary(std::vector<double> samples);

// utime + stime of process `pid` in seconds (`pid` 0: this process); -1 when unreadable.
double CpuSeconds(pid_t pid);
// VmRSS and VmHWM (peak) of `pid` in bytes; -1 when unreadable.
int64_t RssBytes(pid_t pid);
int64_t PeakRssBytes(pid_t pid);

// CPU use of a process between construction and Percent(): 100 = one core busy.
class CpuMeter {
 public:
  explicit CpuMeter(pid_t pid);
  double Percent() const;

 private:
  pid_t pid_;
  double cpu0_;
  std::chrono::steady_clock::time_point t0_;
};

// The value of the first sample of `name` (with its labels, e.g. `deepnet_workers{state="lost"}`)
// in a Prometheus text page; -1 when absent.
double PrometheusValue(const std::string& page, const std::string& name);

// A channel of its own to `address` (no subchannel shared with other channels, so each gets
// its own TCP connection, as separate machines would).
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& address);

// The reference call: an empty unary round trip (grpc.health.v1.Health/Check with an empty
// request through rpc::HealthCheckClient, over the callback API like the fake workers' streams)
// on its own channel.
class UnaryProbe {
 public:
  explicit UnaryProbe(const std::string& address);
  // Milliseconds of one call; -1 (and the status on stderr) when it failed.
  double RoundTripMs();

 private:
  rpc::HealthCheckClient health_;
};

// A deepnet-coordinator on 127.0.0.1 with ports chosen at run time and its database in `dir`;
// killed (SIGKILL, whole process group) when destroyed.
class CoordinatorProcess {
 public:
  // Starts `binary` with `extra` flags added; Start() false (and the log's tail on stderr) if it
  // did not write its port file within 30 s.
  CoordinatorProcess(std::string binary, std::string dir);
  [[nodiscard]] bool Start(const std::vector<std::string>& extra);
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  std::string address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  int metrics_port() const { return metrics_port_; }
  std::string Metrics() const;
  std::string LogTail(size_t bytes) const;

 private:
  std::string binary_;
  std::string dir_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  std::unique_ptr<testing::Child> child_;
};

// A fresh folder under the system temp dir; removed by the destructor unless
// DEEPNET_KEEP_BENCH_DIR is set.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace deepnet::bench
