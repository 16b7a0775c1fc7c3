#pragma once
// The control-plane benchmarks of deepnet_bench_control_plane (docs/PERFORMANCE.md, "Control
// plane"). Each starts real daemons on loopback, prints one JSON object on stdout and returns the
// process exit code (non-zero when the run itself failed, never because of a number).
#include <cstdint>
#include <string>

namespace deepnet::bench {

struct Binaries {
  std::string coordinator;  // deepnet-coordinator
  std::string worker;       // deepnet-worker
  std::string trainer;      // deepnet
};

struct HeartbeatOptions {
  int workers = 1000;
  int heartbeat_ms = 1000;
  double warmup_s = 5;
  double duration_s = 30;
  int reference_calls = 500;  // empty unary round trips on the idle coordinator
  double probe_hz = 20;       // empty unary round trips per second during the window
};
int RunHeartbeats(const Binaries& binaries, const HeartbeatOptions& options);

struct SubmitOptions {
  int jobs = 500;         // per measurement (sequential, then each concurrency)
  int concurrency_a = 4;  // concurrent clients of the two throughput runs
  int concurrency_b = 8;
};
int RunSubmit(const Binaries& binaries, const SubmitOptions& options);

struct FanoutOptions {
  int watchers = 100;
  double points_per_s = 20;
  double duration_s = 20;
};
int RunFanout(const Binaries& binaries, const FanoutOptions& options);

struct RecoveryOptions {
  int runs = 5;
  int64_t kill_after_checkpoint = 10;  // kill once a checkpoint of this step exists
  double stop_grace_s = 10;             // coordinator --stop-grace-s (its default: 10)
};
int RunRecovery(const Binaries& binaries, const RecoveryOptions& options);

}  // namespace deepnet::bench
