// The service end to end on loopback: a real deepnet-coordinator, deepnet-worker daemons and
// the trainer processes they spawn, driven over gRPC as deepnetctl would.
#include <gmock/gmock.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <set>
#include <sstream>

#include "deepnet/v1/rendezvous.grpc.pb.h"
#include "tests/integration/service_cluster.h"

namespace deepnet::testing {
namespace {

using ::testing::HasSubstr;

// The same job reading a TSV file instead of the synthetic task.
std::string WithTsvData(std::string yaml, const std::string& path) {
  const size_t begin = yaml.find("data: ");
  const size_t end = yaml.find('\n', begin);
  return yaml.replace(begin, end - begin, "data: {source: tsv, train_path: " + path + "}");
}


class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.StartCoordinator()) << cluster_.Log("coordinator.1.log");
    jobs_ = cluster_.Jobs();
  }

  grpc::Status Call(const char* token,
                    const std::function<grpc::Status(grpc::ClientContext*)>& call) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, token, std::chrono::seconds(30));
    return call(&context);
  }

  v1::SubmitJobResponse Submit(const std::string& yaml, const std::string& key = "") {
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(yaml);
    request.set_idempotency_key(key);
    v1::SubmitJobResponse response;
    grpc::Status s = Call(kAliceToken, [&](grpc::ClientContext* c) {
      return jobs_->SubmitJob(c, request, &response);
    });
    EXPECT_TRUE(s.ok()) << rpc::Describe(s);
    return response;
  }

  v1::Job Get(const std::string& id, const char* token = kAliceToken) {
    v1::GetJobRequest request;
    request.set_job_id(id);
    v1::Job job;
    grpc::Status s = Call(token, [&](grpc::ClientContext* c) { return jobs_->GetJob(c, request, &job); });
    if (!s.ok()) job.set_message("GetJob failed: " + rpc::Describe(s));
    return job;
  }

  // Waits for the job to reach `state`; on failure the message carries the logs' tails.
  bool WaitState(const std::string& id, v1::JobState state, std::chrono::seconds limit) {
    const bool ok = WaitFor([&] { return Get(id).state() == state; }, limit);
    if (!ok) {
      ADD_FAILURE() << "job " << id << " is " << v1::JobState_Name(Get(id).state()) << " ("
                    << Get(id).message() << "), expected " << v1::JobState_Name(state)
                    << "\ncoordinator log:\n"
                    << Tail(cluster_.Log("coordinator.1.log"));
    }
    return ok;
  }

  static std::string Tail(const std::string& text) {
    return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
  }

  std::vector<v1::JobEvent> Events(const std::string& id) {
    bool finished = false;
    std::vector<v1::JobEvent> out = JobEventsAs(*jobs_, id, &finished);
    EXPECT_TRUE(finished);
    return out;
  }

  std::vector<v1::MetricPoint> Points(const std::string& id) {
    v1::StreamMetricsRequest request;
    request.set_job_id(id);
    grpc::ClientContext context;
    rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
    auto reader = jobs_->StreamMetrics(&context, request);
    std::vector<v1::MetricPoint> out;
    v1::StreamMetricsResponse batch;
    while (reader->Read(&batch)) out.insert(out.end(), batch.points().begin(), batch.points().end());
    EXPECT_TRUE(reader->Finish().ok());
    return out;
  }

  // Workers READY in ListWorkers (asked as the admin).
  int ReadyWorkers() {
    v1::ListWorkersResponse response;
    const grpc::Status s = Call(kAdminToken, [&](grpc::ClientContext* c) {
      return jobs_->ListWorkers(c, v1::ListWorkersRequest(), &response);
    });
    if (!s.ok()) return -1;
    int ready = 0;
    for (const v1::Worker& w : response.workers()) ready += w.state() == v1::WORKER_STATE_READY;
    return ready;
  }

  // Cancels job `id` as alice and waits until it is CANCELLED.
  void CancelAndWait(const std::string& id, std::chrono::seconds limit) {
    v1::CancelJobRequest cancel;
    cancel.set_job_id(id);
    v1::Job after;
    EXPECT_TRUE(Call(kAliceToken, [&](grpc::ClientContext* c) {
                  return jobs_->CancelJob(c, cancel, &after);
                }).ok());
    EXPECT_TRUE(WaitState(id, v1::JOB_STATE_CANCELLED, limit));
  }

  // RegisterWorker of a one-slot worker named `name`, called with `token`; the answer in `out`.
  grpc::Status RegisterAs(const std::string& token, const std::string& name,
                          v1::RegisterWorkerResponse* out = nullptr) {
    if (!workers_) {
      rpc::ChannelOptions options;
      options.address = cluster_.address();
      workers_ = v1::WorkerService::NewStub(*rpc::MakeChannel(options));
    }
    v1::RegisterWorkerRequest reg;
    reg.set_worker_name(name);
    reg.add_slots()->set_index(0);
    v1::RegisterWorkerResponse registered;
    return Call(token.c_str(), [&](grpc::ClientContext* c) {
      return workers_->RegisterWorker(c, reg, out != nullptr ? out : &registered);
    });
  }

  ServiceCluster cluster_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

TEST_F(ControlPlaneTest, GangTrainsToSuccessWithCheckpointsMetricsAndPrometheus) {
  cluster_.StartWorker("w1", 2);
  cluster_.StartWorker("w2", 2);
  const std::string ckpt = cluster_.UserDir("alice") + "/ckpt";
  const v1::SubmitJobResponse submitted = Submit(SyntheticJobYaml(ckpt, 30, 10), "first");
  ASSERT_TRUE(submitted.created());
  const std::string id = submitted.job().job_id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_RUNNING, std::chrono::seconds(120)));
  // Each stage's data-parallel pair on one worker.
  const v1::Job running = Get(id);
  ASSERT_EQ(running.placement_size(), 4);
  EXPECT_EQ(running.placement(0).worker_id(), running.placement(1).worker_id());
  EXPECT_EQ(running.placement(2).worker_id(), running.placement(3).worker_id());
  // The per-job gauges are exported while it trains.
  ASSERT_TRUE(WaitFor(
      [&] {
        return HttpGet(cluster_.metrics_port(), "/metrics").find("deepnet_job_loss{job=\"" + id) !=
               std::string::npos;
      },
      std::chrono::seconds(60)));
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED, std::chrono::seconds(240)));
  const v1::Job done = Get(id);
  EXPECT_EQ(done.step(), 30);
  EXPECT_EQ(done.attempt(), 1);
  EXPECT_EQ(done.latest_checkpoint_step(), 30);
  // Checkpoints on shared storage, the last one `latest`.
  v1::ListCheckpointsRequest list;
  list.set_job_id(id);
  v1::ListCheckpointsResponse checkpoints;
  ASSERT_TRUE(Call(kAliceToken, [&](grpc::ClientContext* c) {
                return jobs_->ListCheckpoints(c, list, &checkpoints);
              }).ok());
  ASSERT_GE(checkpoints.checkpoints_size(), 1);
  EXPECT_EQ(checkpoints.checkpoints(checkpoints.checkpoints_size() - 1).step(), 30);
  EXPECT_TRUE(checkpoints.checkpoints(checkpoints.checkpoints_size() - 1).latest());
  EXPECT_GT(checkpoints.checkpoints(0).size_bytes(), 0);
  // Metrics replay: every step once, loss finite.
  const std::vector<v1::MetricPoint> points = Points(id);
  ASSERT_EQ(points.size(), 30u);
  EXPECT_EQ(points.front().step(), 1);
  EXPECT_EQ(points.back().step(), 30);
  EXPECT_GT(points.back().tokens_per_s(), 0);
  // The event history: every state in order.
  std::vector<v1::JobState> states;
  for (const v1::JobEvent& e : Events(id)) {
    if (e.type() == v1::JOB_EVENT_TYPE_STATE_CHANGED) states.push_back(e.to_state());
  }
  EXPECT_EQ(states, (std::vector<v1::JobState>{v1::JOB_STATE_QUEUED, v1::JOB_STATE_PLACING,
                                               v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING,
                                               v1::JOB_STATE_SUCCEEDED}));
  const std::string metrics = HttpGet(cluster_.metrics_port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("deepnet_jobs{state=\"succeeded\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("deepnet_workers{state=\"ready\"} 2"));
  EXPECT_TRUE(cluster_.Trainers(id).empty());
}

TEST_F(ControlPlaneTest, KilledTrainerIsRestartedFromTheLatestCheckpoint) {
  cluster_.StartWorker("w1", 2);
  cluster_.StartWorker("w2", 2);
  const std::string id =
      Submit(SyntheticJobYaml(cluster_.UserDir("alice") + "/ckpt", 40, 5)).job().job_id();
  ASSERT_TRUE(WaitFor([&] { return Get(id).latest_checkpoint_step() >= 10; },
                      std::chrono::seconds(240)));
  std::map<pid_t, int> trainers = cluster_.Trainers(id);
  ASSERT_EQ(trainers.size(), 4u);
  const int64_t checkpoint = Get(id).latest_checkpoint_step();
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(trainers.begin()->first, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return Get(id).attempt() == 2; }, std::chrono::seconds(60)));
  // Training again: a step of attempt 2 was reported.
  ASSERT_TRUE(WaitFor([&] { return Get(id).attempt() == 2 && Get(id).state() == v1::JOB_STATE_RUNNING && Get(id).step() > checkpoint; },
                      std::chrono::seconds(120)));
  const double recovery_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  std::printf("[recovery] kill -9 of a trainer -> training again (attempt 2, step > %lld): %.1f s\n",
              static_cast<long long>(checkpoint), recovery_s);
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED, std::chrono::seconds(240)));
  const v1::Job done = Get(id);
  EXPECT_EQ(done.restarts(), 1);
  EXPECT_EQ(done.recovery_cause(), v1::RECOVERY_CAUSE_RANK_EXIT);
  // Attempt 2 resumed after a checkpoint instead of starting over.
  int64_t first_step_of_retry = -1;
  for (const v1::MetricPoint& p : Points(id)) {
    if (p.attempt() == 2) {
      first_step_of_retry = p.step();
      break;
    }
  }
  EXPECT_GT(first_step_of_retry, 5);
  bool saw_recovering = false, saw_exit = false;
  for (const v1::JobEvent& e : Events(id)) {
    saw_recovering |= e.to_state() == v1::JOB_STATE_RECOVERING;
    saw_exit |= e.type() == v1::JOB_EVENT_TYPE_RANK_EXITED && e.signal() == SIGKILL;
  }
  EXPECT_TRUE(saw_recovering);
  EXPECT_TRUE(saw_exit);
}

TEST_F(ControlPlaneTest, LostWorkerDaemonsJobMovesToTheOtherWorkerAndItsTrainersExit) {
  cluster_.StartWorker("w1", 2);
  cluster_.StartWorker("w2", 2);
  const std::string id = Submit(SyntheticJobYaml(cluster_.UserDir("alice") + "/ckpt", 200, 10,
                                                 "{max_restarts: 2}", 2, 1))
                             .job()
                             .job_id();
  ASSERT_TRUE(WaitFor([&] { return Get(id).latest_checkpoint_step() >= 10; },
                      std::chrono::seconds(240)));
  const v1::Job running = Get(id);
  ASSERT_EQ(running.placement_size(), 2);
  const std::string holder = running.placement(0).worker_id();
  ASSERT_EQ(running.placement(1).worker_id(), holder);  // both stages packed on one worker
  const std::map<pid_t, int> orphans = cluster_.Trainers(id);
  ASSERT_EQ(orphans.size(), 2u);
  cluster_.KillWorker(holder);
  // Lease (3 heartbeats) -> WORKER_LOST -> attempt 2 on the other worker.
  ASSERT_TRUE(WaitFor([&] { return Get(id).attempt() == 2; }, std::chrono::seconds(60)));
  EXPECT_EQ(Get(id).recovery_cause(), v1::RECOVERY_CAUSE_WORKER_LOST);
  EXPECT_NE(Get(id).placement(0).worker_id(), holder);
  // The dead daemon's trainers notice and exit by themselves.
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const auto& [pid, rank] : orphans) {
          if (kill(pid, 0) == 0 && Slurp("/proc/" + std::to_string(pid) + "/stat").find(") Z") ==
                                       std::string::npos) {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(30)));
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED, std::chrono::seconds(240)));
}

TEST_F(ControlPlaneTest, CoordinatorKilledMidJobComesBackAndTheJobFinishes) {
  cluster_.StartWorker("w1", 2);
  cluster_.StartWorker("w2", 2);
  const std::string id =
      Submit(SyntheticJobYaml(cluster_.UserDir("alice") + "/ckpt", 150, 50)).job().job_id();
  ASSERT_TRUE(WaitFor([&] { return Get(id).step() >= 3; }, std::chrono::seconds(240)));
  cluster_.KillCoordinator();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(cluster_.StartCoordinator());
  jobs_ = cluster_.Jobs();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED, std::chrono::seconds(240)));
  // The running ranks were re-adopted, not restarted.
  EXPECT_EQ(Get(id).attempt(), 1);
  EXPECT_EQ(Get(id).restarts(), 0);
}

TEST_F(ControlPlaneTest, CancelStopsEveryRankAndLeavesNoProcessBehind) {
  cluster_.StartWorker("w1", 2);
  cluster_.StartWorker("w2", 2);
  const std::string id =
      Submit(SyntheticJobYaml(cluster_.UserDir("alice") + "/ckpt", 100000, 0)).job().job_id();
  ASSERT_TRUE(WaitFor([&] { return Get(id).step() >= 2; }, std::chrono::seconds(240)));
  ASSERT_EQ(cluster_.Trainers(id).size(), 4u);
  const auto asked = std::chrono::steady_clock::now();
  v1::CancelJobRequest cancel;
  cancel.set_job_id(id);
  cancel.set_reason("test");
  v1::Job after;
  ASSERT_TRUE(Call(kAliceToken, [&](grpc::ClientContext* c) {
                return jobs_->CancelJob(c, cancel, &after);
              }).ok());
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_CANCELLED, std::chrono::seconds(30)));
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(30));
  EXPECT_TRUE(cluster_.Trainers(id).empty());
  // A second cancel is a no-op; the workers take new work.
  ASSERT_TRUE(Call(kAliceToken, [&](grpc::ClientContext* c) {
                return jobs_->CancelJob(c, cancel, &after);
              }).ok());
  EXPECT_EQ(after.state(), v1::JOB_STATE_CANCELLED);
}

TEST_F(ControlPlaneTest, BadSpecsAreRejectedNamingTheFieldAndNothingIsStored) {
  cluster_.StartWorker("w1", 2);
  ASSERT_TRUE(WaitFor([&] { return HttpGet(cluster_.metrics_port(), "/metrics").find(
                                       "deepnet_workers{state=\"ready\"} 1") != std::string::npos; },
                      std::chrono::seconds(30)));
  const std::string ckpt = cluster_.UserDir("alice") + "/ckpt";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {SyntheticJobYaml(ckpt, 10, 0) + "bogus: 1\n", "bogus"},
      {SyntheticJobYaml(ckpt, 0, 0), "train.max_steps"},
      {SyntheticJobYaml(ckpt, 10, 0, "{max_restarts: 1}", 9, 1), "parallel.pipeline_stages"},
      {SyntheticJobYaml("/nonexistent/dir/ckpt", 10, 0), "checkpoint.dir"},
      {WithTsvData(SyntheticJobYaml(ckpt, 10, 0), "/nonexistent/train.tsv"), "data.train_path"},
      {SyntheticJobYaml(ckpt, 10, 0, "{max_restarts: -1}"), "scheduling.max_restarts"},
  };
  for (const auto& [yaml, field] : bad) {
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(yaml);
    v1::SubmitJobResponse response;
    grpc::Status s = Call(kAliceToken, [&](grpc::ClientContext* c) {
      return jobs_->SubmitJob(c, request, &response);
    });
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_THAT(s.error_message(), HasSubstr(field));
  }
  v1::ListJobsRequest list;
  list.set_owner("*");
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(Call(kAdminToken, [&](grpc::ClientContext* c) {
                return jobs_->ListJobs(c, list, &jobs);
              }).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
}

TEST_F(ControlPlaneTest, PrometheusServerScrapesTheJobLoss) {
  if (std::system("command -v prometheus > /dev/null") != 0) {
    GTEST_SKIP() << "Debian's prometheus package is not installed (scripts/setup.sh installs it)";
  }
  const int port = UnusedLoopbackPort();
  std::ofstream(cluster_.dir() + "/prometheus.yml")
      << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
         "scrape_configs:\n"
         "  - job_name: deepnet\n"
         "    honor_labels: true\n"
         "    static_configs: [{targets: ['127.0.0.1:"
      << cluster_.metrics_port() << "']}]\n";
  Child prometheus({"prometheus", "--config.file=" + cluster_.dir() + "/prometheus.yml",
                    "--storage.tsdb.path=" + cluster_.dir() + "/prometheus-data",
                    "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                   cluster_.dir() + "/prometheus.log");
  cluster_.StartWorker("w1", 2);
  const std::string id = Submit(SyntheticJobYaml(cluster_.UserDir("alice") + "/ckpt", 100000, 0,
                                                 "{max_restarts: 0}", 2, 1))
                             .job()
                             .job_id();
  const std::string query = "/api/v1/query?query=deepnet_job_loss%7Bjob%3D%22" + id + "%22%7D";
  std::string answer;
  const bool found = WaitFor(
      [&] {
        answer = HttpGet(port, query);
        return answer.find("\"result\":[{") != std::string::npos;
      },
      std::chrono::seconds(120));
  EXPECT_TRUE(found) << "last answer: " << answer << "\nprometheus log:\n"
                     << Tail(Slurp(cluster_.dir() + "/prometheus.log"));
  EXPECT_THAT(answer, HasSubstr(id));
  CancelAndWait(id, std::chrono::seconds(30));
}

TEST_F(ControlPlaneTest, ConcurrentRetriesWithOneIdempotencyKeyMakeOneJob) {
  const std::string yaml =
      SyntheticJobYaml(cluster_.UserDir("alice") + "/ckpt", 10, 0, "{max_restarts: 0}", 1, 1);
  std::vector<std::thread> threads;
  std::vector<std::string> ids(8);
  std::atomic<int> created{0};
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] {
      auto stub = cluster_.Jobs();
      v1::SubmitJobRequest request;
      request.mutable_spec()->set_config_yaml(yaml);
      request.set_idempotency_key("retry-me");
      v1::SubmitJobResponse response;
      grpc::ClientContext context;
      rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
      if (stub->SubmitJob(&context, request, &response).ok()) {
        ids[i] = response.job().job_id();
        created += response.created() ? 1 : 0;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created.load(), 1);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 1u);
  EXPECT_FALSE(ids[0].empty());
}

TEST_F(ControlPlaneTest, AuthenticationMatrix) {
  const std::string id = Submit(SyntheticJobYaml(cluster_.UserDir("alice") + "/ckpt", 10, 0,
                                                 "{max_restarts: 0}", 1, 1))
                             .job()
                             .job_id();
  ASSERT_FALSE(id.empty());
  v1::GetJobRequest get;
  get.set_job_id(id);
  v1::Job job;
  auto get_as = [&](const char* token) {
    return Call(token, [&](grpc::ClientContext* c) { return jobs_->GetJob(c, get, &job); })
        .error_code();
  };
  EXPECT_EQ(get_as(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(get_as("not-a-valid-token-at-all"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(get_as(kAliceToken), grpc::StatusCode::OK);
  EXPECT_EQ(get_as(kBobToken), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(get_as(kAdminToken), grpc::StatusCode::OK);
  EXPECT_EQ(get_as(WorkerToken("w1").c_str()), grpc::StatusCode::PERMISSION_DENIED);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(id);
  EXPECT_EQ(Call(kBobToken, [&](grpc::ClientContext* c) { return jobs_->CancelJob(c, cancel, &job); })
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::ListJobsRequest list;
  list.set_owner("alice");
  v1::ListJobsResponse listed;
  EXPECT_EQ(Call(kBobToken, [&](grpc::ClientContext* c) { return jobs_->ListJobs(c, list, &listed); })
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  list.clear_owner();
  ASSERT_TRUE(Call(kBobToken, [&](grpc::ClientContext* c) { return jobs_->ListJobs(c, list, &listed); })
                  .ok());
  EXPECT_EQ(listed.jobs_size(), 0);  // bob's own jobs: none
  // A user token cannot act as a worker; a worker token acts only as its own worker (issue 25,
  // item 1).
  EXPECT_EQ(RegisterAs(kAliceToken, "intruder").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(RegisterAs(WorkerToken("w1"), "intruder").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(RegisterAs(WorkerToken("w1"), "w1").error_code(), grpc::StatusCode::OK);
}

// One worker's token cannot take over another worker: registering under its name is refused,
// and its session cannot be attached to without the secret of its registration, so the real
// worker stays READY and its jobs are not restarted (issue 25, item 1).
TEST_F(ControlPlaneTest, AWorkerTokenActsOnlyAsItsOwnWorker) {
  cluster_.StartWorker("w1", 1);
  cluster_.StartWorker("w2", 1);
  ASSERT_TRUE(WaitFor([&] { return ReadyWorkers() == 2; }, std::chrono::seconds(60)));
  const grpc::Status as_other = RegisterAs(WorkerToken("w2"), "w1");
  EXPECT_EQ(as_other.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(as_other.error_message(), HasSubstr("may not act as worker 'w1'"));
  // w1's own token with w1's current epoch (its first registration: 1) but a guessed secret;
  // and w2's token naming w1's session.
  for (const std::string& token : {WorkerToken("w1"), WorkerToken("w2")}) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, token, std::chrono::seconds(30));
    auto stream = workers_->Session(&context);
    v1::WorkerMessage start;
    start.set_worker_id("w1");
    start.set_epoch(1);
    start.set_sequence(1);
    start.mutable_start()->set_session_secret("0123456789abcdef0123456789abcdef");
    stream->Write(start);
    stream->WritesDone();
    v1::CoordinatorMessage ignored;
    while (stream->Read(&ignored)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED) << token;
  }
  // Both real workers are untouched.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(ReadyWorkers(), 2);
}

// The lease renewal that answers a heartbeat acknowledges that heartbeat (its ack_sequence),
// not only the message before it: the ack is given once a message is handled, and what the
// handling sends goes out after it.
TEST_F(ControlPlaneTest, TheLeaseRenewalAcknowledgesTheHeartbeatItAnswers) {
  v1::RegisterWorkerResponse registered;
  ASSERT_TRUE(RegisterAs(WorkerToken("w3"), "w3", &registered).ok());
  grpc::ClientContext context;
  rpc::PrepareContext(&context, WorkerToken("w3"), std::chrono::seconds(30));
  auto stream = workers_->Session(&context);
  v1::WorkerMessage message;
  message.set_worker_id(registered.worker_id());
  message.set_epoch(registered.epoch());
  message.set_sequence(1);
  message.mutable_start()->set_session_secret(registered.session_secret());
  ASSERT_TRUE(stream->Write(message));
  for (int64_t sequence = 2; sequence <= 4; ++sequence) {
    message.set_sequence(sequence);
    message.mutable_heartbeat();
    ASSERT_TRUE(stream->Write(message));
    v1::CoordinatorMessage answer;
    do {
      ASSERT_TRUE(stream->Read(&answer));
    } while (!answer.has_lease());
    EXPECT_EQ(answer.ack_sequence(), sequence);
  }
  stream->WritesDone();
  context.TryCancel();
  (void)stream->Finish();
}

// A trainer holds only its rank's rendezvous credential: never the worker's token; good for its
// own attempt's rendezvous scope and for nothing else (issue 25, item 1).
TEST_F(ControlPlaneTest, TrainersHoldOnlyTheirRanksRendezvousCredential) {
  cluster_.StartWorker("w1", 2);
  cluster_.StartWorker("w2", 2);
  const std::string id =
      Submit(SyntheticJobYaml(cluster_.UserDir("alice") + "/ckpt", 100000, 0)).job().job_id();
  ASSERT_TRUE(WaitFor([&] { return Get(id).step() >= 1; }, std::chrono::seconds(240)));
  const std::map<pid_t, int> trainers = cluster_.Trainers(id);
  ASSERT_EQ(trainers.size(), 4u);
  std::string credential;
  for (const auto& [pid, rank] : trainers) {
    const std::string token = EnvOf(pid, "DEEPNET_TOKEN");
    EXPECT_EQ(token.rfind("dnt1:" + id + ":1:" + std::to_string(rank) + ":", 0), 0u) << token;
    for (const char* name : kWorkerNames) EXPECT_NE(token, WorkerToken(name));
    if (rank == 0) credential = token;
  }
  ASSERT_FALSE(credential.empty());
  rpc::ChannelOptions options;
  options.address = cluster_.address();
  std::shared_ptr<grpc::Channel> channel = *rpc::MakeChannel(options);
  auto rendezvous = v1::Rendezvous::NewStub(channel);
  auto num_keys = [&](const std::string& token, const std::string& job, int attempt) {
    v1::RendezvousNumKeysRequest request;
    request.mutable_scope()->set_job_id(job);
    request.mutable_scope()->set_attempt(attempt);
    v1::RendezvousNumKeysResponse response;
    return Call(token.c_str(), [&](grpc::ClientContext* c) {
             return rendezvous->NumKeys(c, request, &response);
           }).error_code();
  };
  EXPECT_EQ(num_keys(credential, id, 1), grpc::StatusCode::OK);
  EXPECT_EQ(num_keys(credential, id, 2), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(num_keys(credential, "j-999999", 1), grpc::StatusCode::PERMISSION_DENIED);
  std::string forged = credential;
  forged.back() = forged.back() == '0' ? '1' : '0';
  EXPECT_EQ(num_keys(forged, id, 1), grpc::StatusCode::UNAUTHENTICATED);
  const std::string other_job = "dnt1:j-999999:1:0:" + credential.substr(credential.rfind(':') + 1);
  EXPECT_EQ(num_keys(other_job, "j-999999", 1), grpc::StatusCode::UNAUTHENTICATED);
  // Worker and user tokens do not open the rendezvous.
  EXPECT_EQ(num_keys(WorkerToken("w1"), id, 1), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(num_keys(kAliceToken, id, 1), grpc::StatusCode::PERMISSION_DENIED);
  // The credential is not a token of the job or worker services.
  v1::ListJobsResponse listed;
  EXPECT_EQ(Call(credential.c_str(), [&](grpc::ClientContext* c) {
              return jobs_->ListJobs(c, v1::ListJobsRequest(), &listed);
            }).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(RegisterAs(credential, "w1").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  CancelAndWait(id, std::chrono::seconds(60));
  // The attempt's end ends its credential's use: the scope is gone.
  EXPECT_EQ(num_keys(credential, id, 1), grpc::StatusCode::FAILED_PRECONDITION);
}

// Revoking the worker token (tokens file without it, then SIGHUP) ends the worker's session:
// it cannot register again, and it is not READY any more (issue 25, item 8).
TEST_F(ControlPlaneTest, ARevokedWorkerTokenEndsTheWorkersSession) {
  cluster_.StartWorker("w1", 1);
  cluster_.StartWorker("w2", 1);
  ASSERT_TRUE(WaitFor([&] { return ReadyWorkers() == 2; }, std::chrono::seconds(60)));
  std::ofstream(cluster_.dir() + "/tokens", std::ios::trunc)
      << kAliceToken << " alice\n" << kAdminToken << " root admin\n";
  ASSERT_EQ(kill(cluster_.CoordinatorPid(), SIGHUP), 0);
  EXPECT_TRUE(WaitFor([&] { return ReadyWorkers() == 0; }, std::chrono::seconds(60)));
}

TEST(ControlPlaneTlsTest, CoordinatorAndWorkerTalkTlsAndPlaintextClientsAreRefused) {
  if (std::system("openssl version > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "the openssl command-line tool is not installed (Debian: openssl)";
  }
  ServiceCluster cluster;
  const std::string cert = cluster.dir() + "/server.pem", key = cluster.dir() + "/server.key";
  const std::string make_cert =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=deepnet-coordinator -addext subjectAltName=DNS:deepnet-coordinator -keyout '" +
      key + "' -out '" + cert + "' > '" + cluster.dir() + "/openssl.log' 2>&1";
  ASSERT_EQ(std::system(make_cert.c_str()), 0) << Slurp(cluster.dir() + "/openssl.log");
  ASSERT_TRUE(cluster.StartCoordinator({"--tls-cert", cert, "--tls-key", key}));
  cluster.StartWorker("w1", 1, {"--ca-cert", cert, "--tls-server-name", "deepnet-coordinator"});
  // The worker registers over TLS.
  EXPECT_TRUE(WaitFor(
      [&] {
        return HttpGet(cluster.metrics_port(), "/metrics")
                   .find("deepnet_workers{state=\"ready\"} 1") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << cluster.Log("worker-w1.log");
  v1::ListJobsRequest list;
  v1::ListJobsResponse jobs;
  {
    // Plaintext: refused.
    auto plain = cluster.Jobs();
    grpc::ClientContext context;
    rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(5));
    EXPECT_EQ(plain->ListJobs(&context, list, &jobs).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  rpc::ChannelOptions options;
  options.address = cluster.address();
  options.ca_cert_file = cert;
  options.tls_server_name = "deepnet-coordinator";
  auto secure = v1::JobService::NewStub(*rpc::MakeChannel(options));
  grpc::ClientContext context;
  rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
  EXPECT_TRUE(secure->ListJobs(&context, list, &jobs).ok());
}

}  // namespace
}  // namespace deepnet::testing
