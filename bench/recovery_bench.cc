// Failure recovery, the real thing: deepnet-coordinator + 2 deepnet-worker (2 slots each) + a
// 2x2 job of the tiny synthetic model checkpointing every 5 steps; kill -9 of one trainer once a
// checkpoint exists; time until a metric point of attempt 2 reaches a StreamMetrics client. The
// breakdown comes from the job's events (coordinator timestamps) and from watching the attempt-2
// trainers' JSON logs appear line by line (checkpoint loading = "layout" -> "resume" event).
#include <signal.h>

#include <atomic>
#include <iostream>
#include <sstream>
#include <thread>

#include "bench/control_plane_benches.h"
#include "bench/control_plane_util.h"
#include "deepnet/v1/job_service.grpc.pb.h"
#include "tests/integration/service_cluster.h"

namespace deepnet::bench {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string RecoveryJob(const std::string& dir) {
  return "name: recovery-bench\n"
         "model: {encoder_layers: 2, decoder_layers: 2, d_model: 32, heads: 2, ffn_dim: 64, "
         "max_positions: 128, dropout: 0.0}\n"
         "data: {synthetic: {languages: [rev, cp], pairs_per_language: 200, max_words: 5}, "
         "max_tokens: 160, max_len: 64, prefetch: 2}\n"
         "optim: {lr: 2.0e-3, warmup_steps: 5}\n"
         "train: {max_steps: 100000, log_every: 1, probe_every: 5, seed: 3}\n"
         "checkpoint: {dir: " + dir + "/ckpt, every_steps: 5, keep_last: 0}\n"
         "runtime: {blas_threads: 1}\n"
         "parallel: {pipeline_stages: 2, data_parallel: 2, backend: gloo, timeout_s: 60}\n"
         "scheduling: {max_restarts: 2}\n";
}

// When (unix ms) each kind of JSON event first appeared in any attempt-2 rank log.
class LogWatcher {
 public:
  explicit LogWatcher(std::vector<std::string> files) : files_(std::move(files)), offsets_(files_.size()) {
    thread_ = std::thread([this] {
      while (!stop_) {
        Poll();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  ~LogWatcher() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Per rank: event -> first time it was seen (unix ms); "file": the first output.
  std::map<std::string, int64_t> First(size_t rank) {
    std::lock_guard<std::mutex> lock(mu_);
    return rank < first_.size() ? first_[rank] : std::map<std::string, int64_t>{};
  }

 private:
  void Poll() {
    const int64_t now = NowMs();
    std::lock_guard<std::mutex> lock(mu_);
    first_.resize(files_.size());
    for (size_t r = 0; r < files_.size(); ++r) {
      const std::string text = testing::Slurp(files_[r]);
      if (text.size() > 0 && !first_[r].count("file")) first_[r]["file"] = now;
      std::istringstream in(text.substr(std::min(offsets_[r], text.size())));
      std::string line;
      size_t consumed = offsets_[r];
      while (std::getline(in, line)) {
        if (in.eof()) break;  // a partial last line: read it whole next time
        consumed += line.size() + 1;
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object() || !j.contains("event")) continue;
        const std::string event = j["event"].get<std::string>();
        if (!first_[r].count(event)) first_[r][event] = now;
      }
      offsets_[r] = consumed;
    }
  }

  std::vector<std::string> files_;
  std::vector<size_t> offsets_;
  std::mutex mu_;
  std::vector<std::map<std::string, int64_t>> first_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One kill -9 and recovery; the timeline in ms after the kill.
nlohmann::json OneRun(const Binaries& binaries, const RecoveryOptions& options, int run) {
  TempDir dir("deepnet-bench-recovery");
  CoordinatorProcess coordinator(binaries.coordinator, dir.path());
  std::ostringstream grace;
  grace << options.stop_grace_s;
  if (!coordinator.Start({"--stop-grace-s", grace.str()})) return {{"error", "coordinator"}};
  std::vector<std::unique_ptr<testing::Child>> workers;
  for (const char* name : {"w1", "w2"}) {
    workers.push_back(std::make_unique<testing::Child>(
        std::vector<std::string>{binaries.worker, "--coordinator", coordinator.address(), "--name",
                                 name, "--slots", "2", "--work-dir",
                                 dir.path() + "/work-" + name, "--trainer", binaries.trainer,
                                 "--listen", "127.0.0.1:0", "--advertise-address", "127.0.0.1"},
        dir.path() + "/worker-" + name + ".log",
        std::vector<std::string>{"OPENBLAS_NUM_THREADS=1"}));
  }
  auto cleanup = [&] {
    for (auto& w : workers) kill(w->pid(), SIGTERM);
    for (auto& w : workers) w->Wait(std::chrono::seconds(20));
    workers.clear();
    for (pid_t pid : testing::ProcessesMentioning(dir.path())) kill(pid, SIGKILL);
  };
  auto jobs = v1::JobService::NewStub(OwnChannel(coordinator.address()));
  auto get = [&](const std::string& id) {
    v1::GetJobRequest request;
    request.set_job_id(id);
    v1::Job job;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!jobs->GetJob(&context, request, &job).ok()) job.Clear();
    return job;
  };
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_config_yaml(RecoveryJob(dir.path()));
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status s = jobs->SubmitJob(&context, submit, &submitted);
    if (!s.ok()) {
      cleanup();
      return {{"error", "SubmitJob: " + s.error_message()}};
    }
  }
  const std::string id = submitted.job().job_id();
  if (!testing::WaitFor([&] { return get(id).latest_checkpoint_step() >= options.kill_after_checkpoint; },
                        std::chrono::seconds(300))) {
    cleanup();
    return {{"error", "no checkpoint within 300 s"}, {"log", coordinator.LogTail(2000)}};
  }
  // The live metrics stream that sees attempt 2's first point.
  grpc::ClientContext metrics_context;
  std::atomic<int64_t> first_point_ms{0}, first_point_step{0}, first_point_time_ms{0};
  std::thread reader([&] {
    v1::StreamMetricsRequest request;
    request.set_job_id(id);
    request.set_live_only(true);
    auto stream = jobs->StreamMetrics(&metrics_context, request);
    v1::StreamMetricsResponse batch;
    while (stream->Read(&batch)) {
      for (const v1::MetricPoint& p : batch.points()) {
        if (p.attempt() == 2 && first_point_ms == 0) {
          first_point_ms = NowMs();
          first_point_step = p.step();
          first_point_time_ms = p.time().seconds() * 1000 + p.time().nanos() / 1000000;
        }
      }
    }
    stream->Finish();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the stream is live
  std::map<pid_t, int> trainers;
  for (pid_t pid : testing::ProcessesMentioning(dir.path())) {
    if (testing::EnvOf(pid, "DEEPNET_JOB_ID") != id) continue;
    const std::string rank = testing::EnvOf(pid, "DEEPNET_RANK");
    if (!rank.empty()) trainers[pid] = std::stoi(rank);
  }
  const v1::Job before = get(id);
  std::vector<std::string> logs;
  for (int r = 0; r < 4; ++r) {
    const std::string worker = before.placement(r).worker_id();
    logs.push_back(dir.path() + "/work-" + worker + "/" + id + "/attempt-2/rank-" +
                   std::to_string(r) + ".stdout.log");
  }
  auto watcher = std::make_unique<LogWatcher>(logs);
  pid_t victim = 0;
  for (const auto& [pid, rank] : trainers) {
    if (rank == 0) victim = pid;
  }
  const int64_t killed_ms = NowMs();
  if (victim == 0 || kill(victim, SIGKILL) != 0) {
    cleanup();
    return {{"error", "no rank-0 trainer to kill"}};
  }
  const bool again =
      testing::WaitFor([&] { return first_point_ms != 0; }, std::chrono::seconds(180));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  watcher->Stop();
  nlohmann::json out;
  out["run"] = run;
  out["checkpoint_step_at_kill"] = before.latest_checkpoint_step();
  out["step_at_kill"] = before.step();
  if (!again) out["error"] = "attempt 2 reported no step within 180 s";
  // Cancel, so that WatchJob's history ends; then read the events.
  v1::CancelJobRequest cancel;
  cancel.set_job_id(id);
  v1::Job after;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    (void)jobs->CancelJob(&context, cancel, &after);
  }
  testing::WaitFor([&] { return get(id).state() == v1::JOB_STATE_CANCELLED; },
                   std::chrono::seconds(40));
  metrics_context.TryCancel();
  reader.join();
  v1::WatchJobRequest watch;
  watch.set_job_id(id);
  watch.set_from_sequence(1);
  grpc::ClientContext watch_context;
  watch_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto events = jobs->WatchJob(&watch_context, watch);
  v1::WatchJobResponse item;
  nlohmann::json timeline;
  auto mark = [&](const std::string& key, int64_t ms) {
    if (ms > 0 && !timeline.contains(key)) timeline[key] = ms - killed_ms;
  };
  while (events->Read(&item)) {
    if (!item.has_event()) continue;
    const v1::JobEvent& e = item.event();
    const int64_t ms = e.time().seconds() * 1000 + e.time().nanos() / 1000000;
    if (e.type() == v1::JOB_EVENT_TYPE_RANK_EXITED && e.attempt() == 1) mark("rank_exit_noticed", ms);
    if (e.type() != v1::JOB_EVENT_TYPE_STATE_CHANGED) continue;
    if (e.to_state() == v1::JOB_STATE_RECOVERING) mark("recovering", ms);
    if (e.to_state() == v1::JOB_STATE_STARTING && e.attempt() == 2) mark("starting_attempt_2", ms);
    if (e.to_state() == v1::JOB_STATE_RUNNING && e.attempt() == 2) mark("running_attempt_2", ms);
  }
  events->Finish();
  // Per rank, when its attempt-2 log showed each event; the slowest rank gates the gang.
  int64_t load_ms = -1;
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < logs.size(); ++r) {
    const std::map<std::string, int64_t> first = watcher->First(r);
    nlohmann::json rank = nlohmann::json::object();  // empty: the rank printed no event
    for (const auto& [event, ms] : first) {
      rank[event] = ms - killed_ms;
    }
    ranks.push_back(rank);
    if (first.count("layout") && first.count("resume")) {
      load_ms = std::max(load_ms, first.at("resume") - first.at("layout"));
    }
  }
  for (const char* event : {"file", "layout", "resume", "start", "step"}) {
    int64_t latest = 0;
    for (const nlohmann::json& rank : ranks) {
      if (rank.contains(event)) latest = std::max(latest, rank[event].get<int64_t>());
    }
    if (latest > 0) timeline[std::string("log_") + event + "_last_rank"] = latest;
  }
  mark("first_point_trainer_time", first_point_time_ms);
  mark("first_point_received", first_point_ms);
  out["first_point_step"] = first_point_step.load();
  out["ranks_log_ms_after_kill"] = ranks;
  out["timeline_ms_after_kill"] = timeline;
  // Checkpoint loading: layout (world and engine built) -> resume (checkpoint read), slowest
  // rank; recovery without it is what the 20 s target is about.
  out["checkpoint_load_ms"] = load_ms;
  if (timeline.contains("first_point_received")) {
    const int64_t total = timeline["first_point_received"].get<int64_t>();
    out["kill_to_training_ms"] = total;
    out["kill_to_training_excluding_load_ms"] = total - std::max<int64_t>(load_ms, 0);
  }
  cleanup();
  return out;
}

}  // namespace

int RunRecovery(const Binaries& binaries, const RecoveryOptions& options) {
  nlohmann::json runs = nlohmann::json::array();
  for (int i = 0; i < options.runs; ++i) {
    runs.push_back(OneRun(binaries, options, i + 1));
    std::cerr << runs.back().dump() << "\n";
  }
  nlohmann::json report;
  report["runs"] = runs;
  std::cout << report.dump(2) << std::endl;
  return 0;
}

}  // namespace deepnet::bench
