#include "ctl/ctl_app.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "tests/ctl/fake_job_service.h"

namespace deepnet::ctl {
namespace {

using google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;
using testing::FakeJobService;
using ::testing::HasSubstr;
using testing::MakeJob;
using ::testing::MatchesRegex;
using testing::Point;
using testing::Snapshot;
using testing::StateChange;

constexpr const char* kSpec =
    "name: wmt-deepnet\n# comment kept verbatim\ntrain:\n  max_steps: 100\n";

// Runs deepnetctl in-process against a FakeJobService.
class CtlAppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.ok());
    env_["DEEPNET_COORDINATOR"] = server_.address();
    char pattern[] = "/tmp/deepnetctl-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  FakeJobService& fake() { return server_.service(); }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  int Run(std::vector<std::string> args, bool tty = false) {
    out_.str("");
    err_.str("");
    args.insert(args.begin(), "deepnetctl");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    CtlEnvironment env;
    env.getenv = [this](const std::string& name) {
      auto it = env_.find(name);
      return it == env_.end() ? std::string() : it->second;
    };
    env.stdout_is_tty = tty;
    env.terminal_width = 100;
    env.out = &out_;
    env.err = &err_;
    return RunDeepnetctl(static_cast<int>(argv.size()), argv.data(), env);
  }

  testing::FakeServer server_;
  std::map<std::string, std::string> env_;
  std::string dir_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(CtlAppTest, SubmitSendsTheYamlVerbatimWithAFreshIdempotencyKey) {
  fake().job = MakeJob("j-1", v1::JOB_STATE_QUEUED);
  const std::string file = WriteFile("job.yaml", kSpec);
  ASSERT_EQ(Run({"submit", file}), 0) << err_.str();
  ASSERT_EQ(Run({"submit", file}), 0) << err_.str();
  ASSERT_EQ(fake().submits.size(), 2u);
  const v1::SubmitJobRequest& request = fake().submits[0];
  EXPECT_EQ(request.spec().config_yaml(), kSpec);
  EXPECT_FALSE(request.validate_only());
  EXPECT_THAT(request.idempotency_key(),
              MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"));
  EXPECT_NE(fake().submits[1].idempotency_key(), request.idempotency_key());
  EXPECT_EQ(out_.str(), "job j-1 created (QUEUED)\n");
}

TEST_F(CtlAppTest, SubmitSendsTheGivenKeyAndValidateOnly) {
  fake().job = MakeJob("", v1::JOB_STATE_UNSPECIFIED);
  const std::string file = WriteFile("job.yaml", kSpec);
  ASSERT_EQ(Run({"submit", file, "--idempotency-key", "k-42", "--validate-only"}), 0);
  ASSERT_EQ(fake().submits.size(), 1u);
  EXPECT_EQ(fake().submits[0].idempotency_key(), "k-42");
  EXPECT_TRUE(fake().submits[0].validate_only());
  EXPECT_THAT(out_.str(), HasSubstr("spec valid: wmt-deepnet, 2 stages x 2 replicas (cpu)"));
}

TEST_F(CtlAppTest, SubmitRetriesUnavailableWithTheSameKey) {
  fake().job = MakeJob("j-1", v1::JOB_STATE_QUEUED);
  fake().created = false;  // The second attempt found the job the first one created.
  fake().fail_count = 2;
  const std::string file = WriteFile("job.yaml", kSpec);
  ASSERT_EQ(Run({"submit", file}), 0) << err_.str();
  ASSERT_EQ(fake().submits.size(), 3u);
  const std::string key = fake().submits[0].idempotency_key();
  EXPECT_FALSE(key.empty());
  EXPECT_EQ(fake().submits[1].idempotency_key(), key);
  EXPECT_EQ(fake().submits[2].idempotency_key(), key);
  EXPECT_THAT(out_.str(), HasSubstr("job j-1 already submitted with idempotency key " + key));
}

TEST_F(CtlAppTest, SubmitGivesUpAfterRepeatedUnavailable) {
  fake().fail_count = INT_MAX;
  const std::string file = WriteFile("job.yaml", kSpec);
  EXPECT_EQ(Run({"submit", file}), 6);
  EXPECT_EQ(fake().submits.size(), 4u);
  EXPECT_EQ(err_.str(), "deepnetctl: UNAVAILABLE: coordinator restarting\n");
}

TEST_F(CtlAppTest, SubmitOfAnUnreadableOrInvalidFileIsAUsageError) {
  EXPECT_EQ(Run({"submit", dir_ + "/missing.yaml"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("missing.yaml: cannot be read"));
  EXPECT_EQ(Run({"submit", WriteFile("bad.yaml", "model: [1, 2\n")}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("invalid YAML"));
  EXPECT_TRUE(fake().submits.empty());
}

TEST_F(CtlAppTest, GetSendsTheIdAndPrintsEveryFormat) {
  fake().job = MakeJob("j-9", v1::JOB_STATE_RUNNING);
  ASSERT_EQ(Run({"get", "j-9"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("j-9"));
  EXPECT_THAT(out_.str(), HasSubstr("40/100"));
  ASSERT_EQ(Run({"get", "j-9", "-o", "json"}), 0);
  v1::Job parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out_.str(), &parsed).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, fake().job));
  ASSERT_EQ(Run({"-o", "yaml", "get", "j-9"}), 0);  // Global flag before the subcommand.
  EXPECT_EQ(YAML::Load(out_.str())["job_id"].as<std::string>(), "j-9");
  ASSERT_EQ(fake().gets.size(), 3u);
  for (const auto& request : fake().gets) EXPECT_EQ(request.job_id(), "j-9");
}

TEST_F(CtlAppTest, ListSendsFiltersAndFollowsEveryPage) {
  for (int page = 0; page < 3; ++page) {
    v1::ListJobsResponse response;
    *response.add_jobs() = MakeJob("j-" + std::to_string(2 * page), v1::JOB_STATE_RUNNING);
    *response.add_jobs() = MakeJob("j-" + std::to_string(2 * page + 1), v1::JOB_STATE_QUEUED);
    if (page < 2) response.set_next_page_token("t" + std::to_string(page + 1));
    fake().pages.push_back(response);
  }
  ASSERT_EQ(Run({"list", "--state", "running", "--state", "QUEUED,failed", "--all-users", "--label",
                 "team=mt", "--label", "run=7", "--name-prefix", "wmt", "--page-size", "2", "-o",
                 "json"}),
            0)
      << err_.str();
  ASSERT_EQ(fake().lists.size(), 3u);
  std::vector<std::string> tokens;
  for (const v1::ListJobsRequest& request : fake().lists) {
    tokens.push_back(request.page_token());
    EXPECT_THAT(request.states(),
                ElementsAre(v1::JOB_STATE_RUNNING, v1::JOB_STATE_QUEUED, v1::JOB_STATE_FAILED));
    EXPECT_EQ(request.owner(), "*");
    EXPECT_EQ(request.labels().size(), 2u);
    EXPECT_EQ(request.labels().at("team"), "mt");
    EXPECT_EQ(request.labels().at("run"), "7");
    EXPECT_EQ(request.name_prefix(), "wmt");
    EXPECT_EQ(request.page_size(), 2);
  }
  EXPECT_THAT(tokens, ElementsAre("", "t1", "t2"));
  v1::ListJobsResponse merged;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out_.str(), &merged).ok());
  ASSERT_EQ(merged.jobs_size(), 6);
  EXPECT_EQ(merged.jobs(5).job_id(), "j-5");
  EXPECT_TRUE(merged.next_page_token().empty());
}

TEST_F(CtlAppTest, ListLimitStopsPagingAndTableShowsTheJobs) {
  for (int page = 0; page < 3; ++page) {
    v1::ListJobsResponse response;
    for (int i = 0; i < 2; ++i) {
      *response.add_jobs() = MakeJob("j-" + std::to_string(2 * page + i), v1::JOB_STATE_RUNNING);
    }
    if (page < 2) response.set_next_page_token("t" + std::to_string(page + 1));
    fake().pages.push_back(response);
  }
  ASSERT_EQ(Run({"list", "--owner", "bob", "--limit", "3"}), 0) << err_.str();
  ASSERT_EQ(fake().lists.size(), 2u);
  EXPECT_EQ(fake().lists[0].owner(), "bob");
  EXPECT_EQ(fake().lists[0].page_size(), 3);
  EXPECT_EQ(fake().lists[1].page_size(), 1);  // Only what the limit still allows.
  EXPECT_THAT(out_.str(), HasSubstr("j-2"));
  EXPECT_THAT(out_.str(), ::testing::Not(HasSubstr("j-3")));
}

TEST_F(CtlAppTest, ListRejectsBadFiltersLocally) {
  EXPECT_EQ(Run({"list", "--state", "sleeping"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("unknown job state 'sleeping'"));
  EXPECT_EQ(Run({"list", "--label", "team"}), 2);
  EXPECT_EQ(Run({"list", "--owner", "bob", "--all-users"}), 2);
  EXPECT_EQ(Run({"list", "--page-size", "-1"}), 2);
  EXPECT_TRUE(fake().lists.empty());
}

TEST_F(CtlAppTest, CancelSendsIdAndReason) {
  fake().job = MakeJob("j-3", v1::JOB_STATE_RUNNING);
  ASSERT_EQ(Run({"cancel", "j-3", "--reason", "wrong data"}), 0);
  ASSERT_EQ(fake().cancels.size(), 1u);
  EXPECT_EQ(fake().cancels[0].job_id(), "j-3");
  EXPECT_EQ(fake().cancels[0].reason(), "wrong data");
  EXPECT_EQ(out_.str(), "job j-3: cancellation requested (state RUNNING)\n");
}

TEST_F(CtlAppTest, CheckpointsSendsIdAndPrintsYaml) {
  auto* checkpoint = fake().checkpoints.add_checkpoints();
  checkpoint->set_step(500);
  checkpoint->set_path("/shared/ckpt/step_0000500");
  checkpoint->set_latest(true);
  ASSERT_EQ(Run({"checkpoints", "j-4", "-o", "yaml"}), 0);
  ASSERT_EQ(fake().checkpoint_requests.size(), 1u);
  EXPECT_EQ(fake().checkpoint_requests[0].job_id(), "j-4");
  const YAML::Node root = YAML::Load(out_.str());
  EXPECT_EQ(root["checkpoints"][0]["path"].as<std::string>(), "/shared/ckpt/step_0000500");
  EXPECT_TRUE(root["checkpoints"][0]["latest"].as<bool>());
}

TEST_F(CtlAppTest, WorkersPrintsEveryFormatAndHasANodesAlias) {
  *fake().workers.add_workers() = testing::MakeWorker("node-a", 2, 2);
  *fake().workers.add_workers() = testing::MakeWorker("node-b", 2, 0);
  ASSERT_EQ(Run({"workers"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("NAME"));
  EXPECT_THAT(out_.str(), MatchesRegex("(.|\n)*node-a +READY +2 +0 +2 +cpu x2 +8 +16.0 GiB +2s ago "
                                       "+job-1 \\(ranks 0,1\\)\n(.|\n)*"));
  ASSERT_EQ(Run({"nodes", "-o", "json"}), 0) << err_.str();
  // The fields scripts wait on (scripts/demo.sh): stable names, defaults included.
  nlohmann::json json = nlohmann::json::parse(out_.str());
  ASSERT_EQ(json["workers"].size(), 2u);
  EXPECT_EQ(json["workers"][1]["name"], "node-b");
  EXPECT_EQ(json["workers"][1]["state"], "WORKER_STATE_READY");
  EXPECT_EQ(json["workers"][1]["slots_total"], 2);
  EXPECT_EQ(json["workers"][1]["slots_used"], 0);
  EXPECT_EQ(json["workers"][1]["slots_free"], 2);
  EXPECT_EQ(json["workers"][0]["slots"][1]["task"]["job_id"], "job-1");
  EXPECT_EQ(json["workers"][0]["last_heartbeat_age"], "2s");
  ASSERT_EQ(Run({"workers", "-o", "yaml"}), 0);
  EXPECT_EQ(YAML::Load(out_.str())["workers"][0]["slots_free"].as<int>(), 0);
  EXPECT_EQ(fake().worker_lists, 3);
}

TEST_F(CtlAppTest, ListShowsThePendingCodeOfQueuedJobs) {
  v1::ListJobsResponse page;
  v1::Job queued = MakeJob("j-7", v1::JOB_STATE_QUEUED);
  queued.set_pending_code(v1::PENDING_CODE_EXCEEDS_REGISTERED);
  queued.set_pending_reason("waiting for workers to join: needs 4 slots");
  *page.add_jobs() = queued;
  *page.add_jobs() = MakeJob("j-8", v1::JOB_STATE_RUNNING);
  fake().pages.push_back(page);
  ASSERT_EQ(Run({"list"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("REASON"));
  EXPECT_THAT(out_.str(), MatchesRegex("(.|\n)*j-7 .* QUEUED +exceeds_registered (.|\n)*"));
  EXPECT_THAT(out_.str(), MatchesRegex("(.|\n)*j-8 .* RUNNING +- (.|\n)*"));
  ASSERT_EQ(Run({"list", "-o", "json"}), 0);
  nlohmann::json json = nlohmann::json::parse(out_.str());
  EXPECT_EQ(json["jobs"][0]["pending_code"], "PENDING_CODE_EXCEEDS_REGISTERED");
  EXPECT_EQ(json["jobs"][1]["pending_code"], "PENDING_CODE_UNSPECIFIED");
  fake().job = queued;
  ASSERT_EQ(Run({"get", "j-7"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("waiting for workers to join: needs 4 slots "
                                    "(exceeds_registered)"));
}

TEST_F(CtlAppTest, MetricsSendsStartAndPrintsJsonLinesOrRows) {
  v1::StreamMetricsResponse replay;
  *replay.add_points() = Point(10, 3.5);
  *replay.add_points() = Point(20, 3.0);
  fake().metric_messages = {replay};
  ASSERT_EQ(Run({"metrics", "j-5", "--from-step", "10", "-o", "json"}), 0) << err_.str();
  ASSERT_EQ(fake().metric_requests.size(), 1u);
  EXPECT_EQ(fake().metric_requests[0].job_id(), "j-5");
  EXPECT_EQ(fake().metric_requests[0].from_step(), 10);
  EXPECT_FALSE(fake().metric_requests[0].live_only());
  std::istringstream lines(out_.str());
  std::string line;
  std::vector<int64_t> steps;
  while (std::getline(lines, line)) {
    v1::MetricPoint point;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &point).ok()) << line;
    steps.push_back(point.step());
  }
  EXPECT_THAT(steps, ElementsAre(10, 20));
  ASSERT_EQ(Run({"metrics", "j-5", "--live-only"}), 0);
  EXPECT_TRUE(fake().metric_requests[1].live_only());
  EXPECT_THAT(out_.str(), HasSubstr("LOSS"));
  EXPECT_THAT(out_.str(), HasSubstr("3.5000"));
}

TEST_F(CtlAppTest, ServerErrorsMapToExitCodesAndPrintTheStatus) {
  const std::vector<std::pair<grpc::StatusCode, int>> cases = {
      {grpc::StatusCode::INVALID_ARGUMENT, 3},  {grpc::StatusCode::FAILED_PRECONDITION, 3},
      {grpc::StatusCode::ALREADY_EXISTS, 3},    {grpc::StatusCode::OUT_OF_RANGE, 3},
      {grpc::StatusCode::NOT_FOUND, 4},         {grpc::StatusCode::UNAUTHENTICATED, 5},
      {grpc::StatusCode::PERMISSION_DENIED, 5}, {grpc::StatusCode::DEADLINE_EXCEEDED, 6},
      {grpc::StatusCode::INTERNAL, 7},          {grpc::StatusCode::UNIMPLEMENTED, 7}};
  for (const auto& [code, exit_code] : cases) {
    fake().fail_count = 1;
    fake().fail_status = grpc::Status(code, "job j-8 says no");
    EXPECT_EQ(Run({"cancel", "j-8"}), exit_code) << code;
    EXPECT_THAT(err_.str(), MatchesRegex("deepnetctl: [A-Z_]+: job j-8 says no\n"));
  }
  fake().fail_count = 1;
  fake().fail_status = grpc::Status(grpc::StatusCode::NOT_FOUND, "job j-8 does not exist");
  EXPECT_EQ(Run({"get", "j-8"}), 4);
  EXPECT_EQ(err_.str(), "deepnetctl: NOT_FOUND: job j-8 does not exist\n");
}

TEST_F(CtlAppTest, TokenIsSentAsBearerFromFlagFileOrEnvironment) {
  fake().job = MakeJob("j-1", v1::JOB_STATE_RUNNING);
  ASSERT_EQ(Run({"get", "j-1"}), 0);
  ASSERT_EQ(Run({"get", "j-1", "--token", "s3cret"}), 0);
  ASSERT_EQ(Run({"get", "j-1", "--token-file", WriteFile("token", "from-file\nignored\n")}), 0);
  env_["DEEPNET_TOKEN"] = "from-env";
  ASSERT_EQ(Run({"get", "j-1"}), 0);
  env_.erase("DEEPNET_TOKEN");
  env_["DEEPNET_TOKEN_FILE"] = WriteFile("token2", "  from-env-file  \n");
  ASSERT_EQ(Run({"get", "j-1"}), 0);
  EXPECT_THAT(fake().authorization, ElementsAre("", "Bearer s3cret", "Bearer from-file",
                                                "Bearer from-env", "Bearer from-env-file"));
  EXPECT_EQ(Run({"get", "j-1", "--token-file", dir_ + "/none"}), 2);
}

TEST_F(CtlAppTest, GlobalFlagsWorkAfterTheSubcommandAndOverrideTheEnvironment) {
  fake().job = MakeJob("j-1", v1::JOB_STATE_RUNNING);
  env_["DEEPNET_COORDINATOR"] = "127.0.0.1:1";  // Nothing there.
  ASSERT_EQ(Run({"get", "j-1", "--coordinator", server_.address(), "--timeout", "5s"}), 0)
      << err_.str();
  EXPECT_EQ(Run({"get", "j-1", "--timeout", "soon"}), 2);
  EXPECT_EQ(Run({"get", "j-1", "-o", "xml"}), 2);
  EXPECT_EQ(Run({"get"}), 2);
  EXPECT_EQ(Run({}), 2);
  EXPECT_EQ(Run({"get", "j-1", "--ca-cert", dir_ + "/no-ca.pem"}), 2);
  EXPECT_EQ(Run({"--help"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("6  coordinator unreachable"));
}

TEST_F(CtlAppTest, WatchFollowsEventsAndMetricsUntilSucceeded) {
  const v1::Job job = MakeJob("j-6", v1::JOB_STATE_RUNNING);
  v1::WatchJobResponse checkpoint;
  checkpoint.mutable_event()->set_sequence(5);
  checkpoint.mutable_event()->set_type(v1::JOB_EVENT_TYPE_CHECKPOINT_SAVED);
  checkpoint.mutable_event()->set_checkpoint_step(100);
  fake().watch_scripts = {{{Snapshot(job), checkpoint,
                            StateChange(6, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED)}}};
  v1::StreamMetricsResponse live;
  *live.add_points() = Point(100, 1.25);
  fake().metric_messages = {live};
  ASSERT_EQ(Run({"watch", "j-6"}), 0) << err_.str();
  ASSERT_EQ(fake().watches.size(), 1u);
  EXPECT_EQ(fake().watches[0].job_id(), "j-6");
  EXPECT_EQ(fake().watches[0].from_sequence(), 0);
  ASSERT_EQ(fake().metric_requests.size(), 1u);
  EXPECT_EQ(fake().metric_requests[0].job_id(), "j-6");
  EXPECT_TRUE(fake().metric_requests[0].live_only());
  EXPECT_THAT(out_.str(), HasSubstr("job j-6 (wmt-deepnet) RUNNING, step 40/100, attempt 1\n"));
  EXPECT_THAT(out_.str(), HasSubstr("checkpoint saved at step 100\n"));
  EXPECT_THAT(out_.str(), HasSubstr("state RUNNING -> SUCCEEDED\n"));
  EXPECT_THAT(out_.str(), HasSubstr("job j-6 ended SUCCEEDED\n"));
  EXPECT_EQ(out_.str().find('\r'), std::string::npos);  // Plain lines when not on a terminal.
}

TEST_F(CtlAppTest, WatchOfAFailedOrCancelledJobExitsOne) {
  fake().watch_scripts = {{{Snapshot(MakeJob("j-6", v1::JOB_STATE_RUNNING)),
                            StateChange(2, v1::JOB_STATE_RUNNING, v1::JOB_STATE_FAILED,
                                        "rank 1 exited with code 3; no restarts left")}}};
  EXPECT_EQ(Run({"watch", "j-6"}), 1);
  EXPECT_THAT(out_.str(), HasSubstr("FAILED: rank 1 exited with code 3; no restarts left"));
  fake().watch_scripts = {{{Snapshot(MakeJob("j-6", v1::JOB_STATE_CANCELLED))}}};
  EXPECT_EQ(Run({"watch", "j-6", "-o", "json"}), 1);
  v1::WatchJobResponse first;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  out_.str().substr(0, out_.str().find('\n')), &first)
                  .ok());
  EXPECT_EQ(first.snapshot().state(), v1::JOB_STATE_CANCELLED);
}

TEST_F(CtlAppTest, WatchOnATerminalRedrawsTheProgressLineInPlace) {
  fake().watch_scripts = {{{Snapshot(MakeJob("j-6", v1::JOB_STATE_RUNNING)),
                            StateChange(9, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED)}}};
  fake().metrics_end = false;  // A live stream: the watch must end it.
  ASSERT_EQ(Run({"watch", "j-6"}, /*tty=*/true), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\r\033[K[############------------------]  40%  step 40/100"));
  EXPECT_THAT(out_.str(), HasSubstr("\r\033[Kstate RUNNING -> SUCCEEDED\n"));
}

TEST_F(CtlAppTest, WatchReconnectsAfterTheStreamBreaksAndResumesAfterTheLastEvent) {
  const v1::Job job = MakeJob("j-6", v1::JOB_STATE_RUNNING);
  FakeJobService::WatchScript broken;
  broken.messages = {Snapshot(job), StateChange(4, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING)};
  broken.end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator restarting");
  FakeJobService::WatchScript rest;
  rest.messages = {Snapshot(job), StateChange(5, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED)};
  fake().watch_scripts = {broken, rest};
  ASSERT_EQ(Run({"watch", "j-6"}), 0) << err_.str();
  ASSERT_EQ(fake().watches.size(), 2u);
  EXPECT_EQ(fake().watches[1].from_sequence(), 5);
  EXPECT_THAT(err_.str(), HasSubstr("reconnecting"));
}

TEST_F(CtlAppTest, WatchFailsClearlyWhenTheCoordinatorIsGone) {
  fake().watch_scripts = {{{Snapshot(MakeJob("j-6", v1::JOB_STATE_RUNNING))},
                           grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down")}};
  server_.Stop();
  EXPECT_EQ(Run({"watch", "j-6", "--timeout", "1s"}), 6);
  EXPECT_THAT(err_.str(), HasSubstr("deepnetctl: UNAVAILABLE: lost the coordinator while "
                                    "watching job j-6"));
}

TEST_F(CtlAppTest, WatchOfAnUnknownJobExitsNotFound) {
  fake().fail_count = INT_MAX;
  fake().fail_status = grpc::Status(grpc::StatusCode::NOT_FOUND, "job j-404 does not exist");
  EXPECT_EQ(Run({"watch", "j-404"}), 4);
  EXPECT_THAT(err_.str(), HasSubstr("deepnetctl: NOT_FOUND: job j-404 does not exist"));
}

TEST_F(CtlAppTest, SubmitWatchFollowsTheNewJob) {
  fake().job = MakeJob("j-7", v1::JOB_STATE_QUEUED);
  fake().watch_scripts = {
      {{Snapshot(fake().job), StateChange(2, v1::JOB_STATE_QUEUED, v1::JOB_STATE_CANCELLED)}}};
  EXPECT_EQ(Run({"submit", WriteFile("job.yaml", kSpec), "--watch"}), 1);
  ASSERT_EQ(fake().watches.size(), 1u);
  EXPECT_EQ(fake().watches[0].job_id(), "j-7");
  EXPECT_THAT(out_.str(), HasSubstr("job j-7 created (QUEUED)\n"));
  EXPECT_THAT(out_.str(), HasSubstr("job j-7 ended CANCELLED\n"));
}

}  // namespace
}  // namespace deepnet::ctl
