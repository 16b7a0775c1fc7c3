// DeepNet across hosts (ctest label `netns`): every daemon and trainer runs on a "host" of its
// own (tests/netns/netns_hosts.h: network namespaces on a private bridge), so Gloo, the
// rendezvous and the control plane cross real interfaces instead of loopback. Skipped where
// namespaces cannot be made (not root, no `ip`).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "tests/integration/service_cluster.h"
#include "tests/netns/netns_hosts.h"
#include "tests/temp_dir.h"

namespace deepnet::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The Gloo address a trainer's stderr says it bound ("" when it said none).
std::string GlooBinds(const std::string& log) {
  const size_t at = log.find("gloo binds ");
  if (at == std::string::npos) return "";
  const size_t start = at + sizeof("gloo binds ") - 1;
  return log.substr(start, log.find(' ', start) - start);
}

class MultiHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = NetnsHosts::WhyUnavailable(); !why.empty()) {
      GTEST_SKIP() << "network namespaces unavailable: " << why;
    }
  }

  // Makes `count` hosts; host 0 runs the coordinator.
  void MakeHosts(int count) {
    hosts_ = std::make_unique<NetnsHosts>(count);
    ASSERT_EQ(hosts_->error(), "");
    cluster_ = std::make_unique<ServiceCluster>();
    cluster_->coordinator_placement = {hosts_->Prefix(0), hosts_->address(0)};
  }

  void StartWorkerOn(int host, const std::string& name, int slots) {
    cluster_->worker_placements[name] = {hosts_->Prefix(host), hosts_->address(host)};
    cluster_->StartWorker(name, slots);
  }

  // deepnetctl on host 0 as alice, JSON output; its output, with `code` its exit status.
  std::string Ctl(const std::vector<std::string>& args, int* code = nullptr) {
    std::vector<std::string> command = {DEEPNETCTL_BINARY,
                                        "--coordinator",
                                        cluster_->address(),
                                        "--token",
                                        kAliceToken,
                                        "-o",
                                        "json"};
    command.insert(command.end(), args.begin(), args.end());
    std::string out;
    const int status = hosts_->Run(0, command, &out);
    if (code != nullptr) *code = status;
    return out;
  }

  std::string Submit(const std::string& yaml) {
    const std::string file = cluster_->dir() + "/job-" + std::to_string(++submitted_) + ".yaml";
    std::ofstream(file) << yaml;
    int code = 0;
    const std::string out = Ctl({"submit", file}, &code);
    EXPECT_EQ(code, 0) << out;
    const nlohmann::json json = nlohmann::json::parse(out, nullptr, false);
    if (!json.is_object()) return "";
    const nlohmann::json& job = json.contains("job") ? json["job"] : json;
    return job.value("job_id", "");
  }

  // The job as `deepnetctl get` shows it; a call that fails (a loaded machine) is tried again,
  // up to five times, then an empty object.
  nlohmann::json Get(const std::string& id) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      const nlohmann::json json = nlohmann::json::parse(Ctl({"get", id}), nullptr, false);
      if (json.is_object()) return json;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return nlohmann::json::object();
  }
  std::string State(const std::string& id) { return Get(id).value("state", std::string()); }
  int64_t Number(const std::string& id, const char* field) {
    const nlohmann::json job = Get(id);
    if (!job.contains(field)) return 0;
    const nlohmann::json& value = job[field];
    if (value.is_number_integer()) return value.get<int64_t>();
    return value.is_string() ? std::strtoll(value.get<std::string>().c_str(), nullptr, 10) : 0;
  }

  std::string Logs() {
    std::string text = cluster_->Log("coordinator.1.log");
    for (const char* w : {"w1", "w2", "w3"})
      text += cluster_->Log(std::string("worker-") + w + ".log");
    return text.size() > 8000 ? text.substr(text.size() - 8000) : text;
  }

  // Every rank-N.stderr.log of `job`'s attempt on worker `name`.
  std::vector<std::string> TrainerLogs(const std::string& name, const std::string& job,
                                       int attempt) {
    std::vector<std::string> out;
    const std::string dir =
        cluster_->dir() + "/work-" + name + "/" + job + "/attempt-" + std::to_string(attempt);
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string file = it->path().filename().string();
      if (file.rfind("rank-", 0) == 0 && file.find(".stderr.log") != std::string::npos) {
        out.push_back(Slurp(it->path().string()));
      }
    }
    return out;
  }

  // Declared first, destroyed last: the cluster stops its daemons, then the hosts go.
  std::unique_ptr<NetnsHosts> hosts_;
  std::unique_ptr<ServiceCluster> cluster_;
  int submitted_ = 0;
};

TEST_F(MultiHostTest, FixtureMakesHostsThatReachEachOtherButNotTheMachine) {
  MakeHosts(2);
  EXPECT_TRUE(hosts_->CanConnect(0, 1, 5000));
  EXPECT_TRUE(hosts_->CanConnect(1, 0, 5000));
  // Loopback is up in every host, and eth0 carries the host's address.
  std::string out;
  EXPECT_EQ(hosts_->Run(1, {"ip", "-o", "link", "show", "dev", "lo"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("UP"));
  EXPECT_EQ(hosts_->Run(1, {"ip", "-4", "-o", "addr", "show", "dev", "eth0"}, &out), 0);
  EXPECT_THAT(out, HasSubstr(hosts_->address(1) + "/24"));
  // No route leaves the bridge: the machine's own network is out of reach.
  EXPECT_EQ(hosts_->Run(1, {"ip", "route", "show"}, &out), 0);
  EXPECT_THAT(out, Not(HasSubstr("default"))) << out;
  // A link taken down cuts the host off the bridge; back up, it is reachable again.
  ASSERT_TRUE(hosts_->SetLink(1, false)) << hosts_->error();
  EXPECT_FALSE(hosts_->CanConnect(0, 1, 1000));
  ASSERT_TRUE(hosts_->SetLink(1, true)) << hosts_->error();
  EXPECT_TRUE(WaitFor([&] { return hosts_->CanConnect(0, 1, 1000); }, std::chrono::seconds(10)));
}

// deepnet-coordinator on host 0, deepnet-worker daemons on hosts 1 and 2 (two slots each), a
// 2x2 Gloo job submitted with deepnetctl: every rank binds its own host's address.
TEST_F(MultiHostTest, CoordinatorAndWorkersOnSeparateHostsRunA2x2GlooJob) {
  MakeHosts(3);
  ASSERT_TRUE(cluster_->StartCoordinator()) << cluster_->Log("coordinator.1.log");
  StartWorkerOn(1, "w1", 2);
  StartWorkerOn(2, "w2", 2);
  const std::string id =
      Submit(SyntheticJobYaml(cluster_->UserDir("alice") + "/ckpt", 6, 3, "{max_restarts: 0}"));
  ASSERT_FALSE(id.empty()) << Logs();
  ASSERT_TRUE(
      WaitFor([&] { return State(id) == "JOB_STATE_SUCCEEDED"; }, std::chrono::seconds(240)))
      << Get(id).dump(1) << "\n"
      << Logs();
  int ranks = 0;
  for (int host : {1, 2}) {
    for (const std::string& log : TrainerLogs("w" + std::to_string(host), id, 1)) {
      EXPECT_EQ(GlooBinds(log), hosts_->address(host)) << log;
      ++ranks;
    }
  }
  EXPECT_EQ(ranks, 4);
}

// Standalone `deepnet train` on two hosts, two ranks each, with the variables srun sets (no
// local-size variable): every rank binds its host's bridge address, not 127.0.0.1, trains and
// checkpoints.
TEST_F(MultiHostTest, StandaloneGlooAcrossHostsWithSrunVariables) {
  MakeHosts(2);
  TempDir dir;
  const std::string config = dir / "job.yaml";
  std::ofstream(config) << SyntheticJobYaml(dir / "ckpt", 6, 3);
  std::vector<std::unique_ptr<Child>> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    const int node = rank / 2;
    std::vector<std::string> args = hosts_->Prefix(node);
    args.insert(args.end(), {DEEPNET_BINARY, "train", "--config", config});
    ranks.push_back(std::make_unique<Child>(
        args, dir / ("rank-" + std::to_string(rank) + ".log"),
        std::vector<std::string>{
            "SLURM_PROCID=" + std::to_string(rank), "SLURM_NTASKS=4",
            "SLURM_NODEID=" + std::to_string(node), "SLURM_STEP_TASKS_PER_NODE=2(x2)",
            "SLURM_LOCALID=" + std::to_string(rank % 2), "SLURM_JOB_ID=16", "SLURM_STEP_ID=0",
            "MASTER_ADDR=" + hosts_->address(0), "MASTER_PORT=29516", "OPENBLAS_NUM_THREADS=1"}));
  }
  for (int rank = 0; rank < 4; ++rank) {
    const std::string log_path = dir / ("rank-" + std::to_string(rank) + ".log");
    EXPECT_EQ(ranks[rank]->Wait(std::chrono::seconds(240)), 0) << Slurp(log_path);
    const std::string log = Slurp(log_path);
    EXPECT_EQ(GlooBinds(log), hosts_->address(rank / 2)) << log;
    EXPECT_THAT(log, Not(HasSubstr("gloo binds 127."))) << log;
  }
  EXPECT_EQ(Slurp(dir / "ckpt/latest"), "step_000000006\n");
}

// A partition: the link of a worker's host goes down mid-job. The coordinator declares that
// worker lost and resumes the job from its checkpoint on the other worker and a spare one.
TEST_F(MultiHostTest, WorkerCutOffByItsLinkIsLostAndTheJobResumesOnASpare) {
  MakeHosts(4);
  ASSERT_TRUE(
      cluster_->StartCoordinator({"--heartbeat-interval-ms", "500", "--lease-heartbeats", "4"}))
      << cluster_->Log("coordinator.1.log");
  StartWorkerOn(1, "w1", 2);
  StartWorkerOn(2, "w2", 2);
  // 60 steps: once the link is down the job stalls, but until then it must not finish first.
  const std::string yaml =
      SyntheticJobYaml(cluster_->UserDir("alice") + "/ckpt", 60, 3, "{max_restarts: 3}");
  // A short collective timeout: attempt 1's ranks on w1 give up on w2's soon.
  const std::string id = Submit(absl::StrReplaceAll(yaml, {{"timeout_s: 60", "timeout_s: 15"}}));
  ASSERT_FALSE(id.empty()) << Logs();
  ASSERT_TRUE(WaitFor([&] { return State(id) == "JOB_STATE_RUNNING"; }, std::chrono::seconds(120)))
      << Get(id).dump(1) << "\n"
      << Logs();
  StartWorkerOn(3, "w3", 2);  // the spare, once the job runs on w1 and w2
  ASSERT_TRUE(
      WaitFor([&] { return Number(id, "latest_checkpoint_step") >= 3; }, std::chrono::seconds(240)))
      << Get(id).dump(1) << "\n"
      << Logs();
  ASSERT_TRUE(hosts_->SetLink(2, false)) << hosts_->error();
  ASSERT_NE(State(id), "JOB_STATE_SUCCEEDED") << "the job ended before the partition";
  ASSERT_TRUE(WaitFor([&] { return Number(id, "attempt") >= 2; }, std::chrono::seconds(60)))
      << Get(id).dump(1) << "\n"
      << Logs();
  EXPECT_EQ(Get(id).value("recovery_cause", std::string()), "RECOVERY_CAUSE_WORKER_LOST");
  ASSERT_TRUE(
      WaitFor([&] { return State(id) == "JOB_STATE_SUCCEEDED"; }, std::chrono::seconds(240)))
      << Get(id).dump(1) << "\n"
      << Logs();
  EXPECT_EQ(Slurp(cluster_->UserDir("alice") + "/ckpt/latest"), "step_000000060\n");
  // The last attempt ran on w1 and the spare, never on the cut-off host.
  const int last = static_cast<int>(Number(id, "attempt"));
  EXPECT_TRUE(TrainerLogs("w2", id, last).empty());
  for (int host : {1, 3}) {
    const std::vector<std::string> logs = TrainerLogs("w" + std::to_string(host), id, last);
    EXPECT_EQ(logs.size(), 2u) << "w" << host;
    for (const std::string& log : logs) EXPECT_EQ(GlooBinds(log), hosts_->address(host)) << log;
  }
}

}  // namespace
}  // namespace deepnet::testing
