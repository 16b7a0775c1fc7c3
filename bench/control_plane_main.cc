// deepnet_bench_control_plane: control-plane benchmarks against real daemons on loopback
// (docs/PERFORMANCE.md, "Control plane"); bench/control_plane.sh runs them all. Each subcommand
// prints one JSON object. Numbers are recorded in docs, never asserted in tests.
#include <signal.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <csignal>

#include "bench/control_plane_benches.h"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  // 1,000 simulated workers need a connection (two descriptors) each, here and in the
  // coordinator (a child: it inherits the limit).
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  deepnet::bench::Binaries binaries{DEEPNET_COORDINATOR_BINARY, DEEPNET_WORKER_BINARY,
                                    DEEPNET_BINARY};
  CLI::App app{"Control-plane benchmarks (real deepnet-coordinator on loopback)"};
  app.require_subcommand(1);
  app.add_option("--coordinator-binary", binaries.coordinator)->capture_default_str();
  app.add_option("--worker-binary", binaries.worker)->capture_default_str();
  app.add_option("--trainer-binary", binaries.trainer)->capture_default_str();

  deepnet::bench::HeartbeatOptions heartbeat;
  CLI::App* hb = app.add_subcommand("heartbeats", "N simulated workers heartbeating");
  hb->add_option("--workers", heartbeat.workers)->check(CLI::PositiveNumber)->capture_default_str();
  hb->add_option("--heartbeat-ms", heartbeat.heartbeat_ms)->capture_default_str();
  hb->add_option("--warmup-s", heartbeat.warmup_s)->capture_default_str();
  hb->add_option("--duration-s", heartbeat.duration_s)->capture_default_str();
  hb->add_option("--reference-calls", heartbeat.reference_calls)->capture_default_str();
  hb->add_option("--probe-hz", heartbeat.probe_hz)->check(CLI::PositiveNumber)->capture_default_str();

  deepnet::bench::SubmitOptions submit;
  CLI::App* sj = app.add_subcommand("submit", "SubmitJob latency and throughput");
  sj->add_option("--jobs", submit.jobs)->check(CLI::PositiveNumber)->capture_default_str();
  sj->add_option("--concurrency-a", submit.concurrency_a)->check(CLI::PositiveNumber)->capture_default_str();
  sj->add_option("--concurrency-b", submit.concurrency_b)->check(CLI::PositiveNumber)->capture_default_str();

  deepnet::bench::FanoutOptions fanout;
  CLI::App* fo = app.add_subcommand("fanout", "StreamMetrics fan-out to many watchers");
  fo->add_option("--watchers", fanout.watchers)->check(CLI::PositiveNumber)->capture_default_str();
  fo->add_option("--points-per-s", fanout.points_per_s)->check(CLI::PositiveNumber)->capture_default_str();
  fo->add_option("--duration-s", fanout.duration_s)->check(CLI::PositiveNumber)->capture_default_str();

  deepnet::bench::RecoveryOptions recovery;
  CLI::App* rc = app.add_subcommand("recovery", "kill -9 of a trainer -> training again");
  rc->add_option("--runs", recovery.runs)->check(CLI::PositiveNumber)->capture_default_str();
  rc->add_option("--kill-after-checkpoint", recovery.kill_after_checkpoint)->capture_default_str();
  rc->add_option("--stop-grace-s", recovery.stop_grace_s)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (*hb) return deepnet::bench::RunHeartbeats(binaries, heartbeat);
  if (*sj) return deepnet::bench::RunSubmit(binaries, submit);
  if (*fo) return deepnet::bench::RunFanout(binaries, fanout);
  return deepnet::bench::RunRecovery(binaries, recovery);
}
