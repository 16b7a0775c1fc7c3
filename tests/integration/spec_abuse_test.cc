// A real deepnet-coordinator kept alive through hostile job specs (issue 13): extreme numbers,
// huge and deep YAML, aliases, NUL bytes. Every one is INVALID_ARGUMENT with a short message,
// nothing is stored, and the coordinator still answers ListJobs and GetJob, also after a
// restart. Then six legal 0.9 MB specs are listed through gRPC's default 4 MB limit, by the
// API and by deepnetctl. The worker's "trainer" is /bin/true: placement runs, no LibTorch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/integration/service_cluster.h"

namespace deepnet::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] =
    "name: abuse\n"
    "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn_dim: 32}\n"
    "train: {max_steps: 5}\n";

// `deepnetctl ARGS` with alice's token; its standard output.
std::string Deepnetctl(const ServiceCluster& cluster, const std::string& args) {
  const std::string command = std::string("DEEPNET_TOKEN=") + kAliceToken + " " +
                              DEEPNETCTL_BINARY + " --coordinator " + cluster.address() + " " +
                              args + " 2>&1";
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 65536> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
  pclose(pipe);
  return out;
}

class SpecAbuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.StartCoordinator()) << cluster_.Log("coordinator.1.log");
    jobs_ = cluster_.Jobs();
  }

  grpc::Status Submit(const std::string& yaml, v1::SubmitJobResponse* response) {
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(yaml);
    grpc::ClientContext context;
    rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(60));
    return jobs_->SubmitJob(&context, request, response);
  }

  grpc::Status List(v1::ListJobsRequest request, v1::ListJobsResponse* response) {
    request.set_owner("*");
    grpc::ClientContext context;
    rpc::PrepareContext(&context, kAdminToken, std::chrono::seconds(60));
    return jobs_->ListJobs(&context, request, response);
  }

  grpc::Status Get(const std::string& id, v1::Job* job) {
    v1::GetJobRequest request;
    request.set_job_id(id);
    grpc::ClientContext context;
    rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(60));
    return jobs_->GetJob(&context, request, job);
  }

  // Every job on every page, following next_page_token.
  std::vector<v1::Job> ListAll(v1::ListJobsRequest request, int* pages) {
    std::vector<v1::Job> out;
    *pages = 0;
    while (*pages < 100) {
      v1::ListJobsResponse response;
      const grpc::Status s = List(request, &response);
      EXPECT_TRUE(s.ok()) << rpc::Describe(s);
      if (!s.ok()) break;
      ++*pages;
      for (const v1::Job& job : response.jobs()) out.push_back(job);
      if (response.next_page_token().empty()) break;
      request.set_page_token(response.next_page_token());
    }
    return out;
  }

  ServiceCluster cluster_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
};

std::vector<std::string> HostileSpecs() {
  std::vector<std::string> specs;
  const std::vector<std::string> numbers = {
      "1e12", "1e308", "-1", "inf", ".nan", "9223372036854775808", "1e400", "-1e308"};
  const std::vector<std::string> fields = {"scheduling: {start_timeout_s: %}",
                                           "scheduling: {hang_timeout_s: %}",
                                           "parallel: {timeout_s: %}",
                                           "scheduling: {priority: %}",
                                           "scheduling: {max_restarts: %}",
                                           "parallel: {data_parallel: %}",
                                           "model: {encoder_layers: %}",
                                           "model: {d_model: %}",
                                           "model: {ffn_dim: %}",
                                           "model: {vocab_size: %}",
                                           "data: {max_tokens: %}",
                                           "train: {max_minutes: %}",
                                           "train: {max_steps: %}",
                                           "optim: {lr: %}"};
  for (const std::string& field : fields) {
    for (const std::string& number : numbers) {
      if (number == "-1" && field.find("priority") != std::string::npos) continue;  // legal
      std::string line = field;
      line.replace(line.find('%'), 1, number);
      specs.push_back(std::string(kJob) + line + "\n");
    }
  }
  std::string keys;
  for (int i = 0; i < 60000; ++i) keys += "k" + std::to_string(i) + ": 1\n";
  specs.push_back(keys);
  std::string bomb = "x0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 10; ++i) {
    bomb += "x" + std::to_string(i) + ": &x" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", *x" : "*x") + std::to_string(i - 1);
    bomb += "]\n";
  }
  specs.push_back(bomb);
  specs.push_back("name: " + std::string(500000, '[') + "\n");
  specs.push_back(std::string(kJob) + "checkpoint: {dir: \"/tmp/a\\0b\"}\n");
  specs.push_back(std::string(kJob) + "scheduling: {labels: {team: \"a\\nb\"}}\n");
  specs.push_back(std::string(kJob) + "name2: " + std::string(3 << 20, 'x') + "\n");
  return specs;
}

TEST_F(SpecAbuseTest, HostileSpecsAreRefusedShortlyAndNothingIsStored) {
  for (const std::string& yaml : HostileSpecs()) {
    SCOPED_TRACE(yaml.substr(0, 200));
    v1::SubmitJobResponse response;
    const grpc::Status s = Submit(yaml, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << rpc::Describe(s);
    EXPECT_FALSE(s.error_message().empty());
    EXPECT_LE(s.error_message().size(), rpc::kMaxStatusMessageBytes);
  }
  // The coordinator still answers, and again after a restart from its database.
  for (int start = 1; start <= 2; ++start) {
    v1::ListJobsResponse listed;
    ASSERT_TRUE(WaitFor([&] { return List(v1::ListJobsRequest(), &listed).ok(); },
                        std::chrono::seconds(30)));
    EXPECT_EQ(listed.jobs_size(), 0);
    v1::Job job;
    EXPECT_EQ(Get("j-000001", &job).error_code(), grpc::StatusCode::NOT_FOUND);
    if (start == 2) break;
    cluster_.KillCoordinator();
    ASSERT_TRUE(cluster_.StartCoordinator()) << cluster_.Log("coordinator.2.log");
    jobs_ = cluster_.Jobs();
  }
}

TEST_F(SpecAbuseTest, SpecsAtTheLimitsArePlacedAndRestartedWithoutHarm) {
  cluster_.StartWorker("w1", 2);
  // Every timeout at its 30-day bound, restarts at theirs (priority is left to the admins'
  // per-user limits).
  const std::string yaml = std::string(kJob) +
                           "parallel: {timeout_s: 2592000, data_parallel: 2}\n"
                           "scheduling: {start_timeout_s: 2592000, hang_timeout_s: 2592000, "
                           "max_restarts: 1000}\n";
  v1::SubmitJobResponse response;
  const grpc::Status s = Submit(yaml, &response);
  ASSERT_TRUE(s.ok()) << rpc::Describe(s);
  const std::string id = response.job().job_id();
  // The trainers (/bin/true) exit at once: the job is placed and ends or restarts.
  v1::Job job;
  ASSERT_TRUE(
      WaitFor([&] { return Get(id, &job).ok() && job.attempt() >= 1; }, std::chrono::seconds(60)))
      << cluster_.Log("coordinator.1.log");
  cluster_.KillCoordinator();
  ASSERT_TRUE(cluster_.StartCoordinator()) << cluster_.Log("coordinator.2.log");
  jobs_ = cluster_.Jobs();
  ASSERT_TRUE(WaitFor([&] { return Get(id, &job).ok(); }, std::chrono::seconds(30)));
  EXPECT_EQ(job.spec().hang_timeout().seconds(), 2592000);
  v1::ListJobsResponse listed;
  ASSERT_TRUE(List(v1::ListJobsRequest(), &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 1);
}

TEST_F(SpecAbuseTest, SixLargeSpecsAreListedInSummariesAndPages) {
  std::string big = kJob;
  const std::string comment = "# " + std::string(98, 'c') + "\n";
  while (big.size() + comment.size() <= 900 * 1000) big += comment;
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    v1::SubmitJobResponse response;
    const grpc::Status s = Submit(big, &response);
    ASSERT_TRUE(s.ok()) << rpc::Describe(s);
    ids.push_back(response.job().job_id());
  }
  int pages = 0;
  std::vector<v1::Job> summaries = ListAll(v1::ListJobsRequest(), &pages);
  ASSERT_EQ(summaries.size(), 6u);
  EXPECT_EQ(pages, 1);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(summaries[i].job_id(), ids[i]);
    EXPECT_TRUE(summaries[i].spec().config_yaml().empty());
    EXPECT_EQ(summaries[i].spec().name(), "abuse");
  }
  v1::ListJobsRequest with_spec;
  with_spec.set_include_spec(true);
  std::vector<v1::Job> full = ListAll(with_spec, &pages);
  ASSERT_EQ(full.size(), 6u);
  EXPECT_EQ(pages, 3);  // two 0.9 MB specs per 2 MiB page
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(full[i].job_id(), ids[i]);
    EXPECT_EQ(full[i].spec().config_yaml(), big);
  }
  const std::string table = Deepnetctl(cluster_, "list");
  for (const std::string& id : ids) EXPECT_THAT(table, HasSubstr(id));
  EXPECT_THAT(Deepnetctl(cluster_, "get " + ids[5] + " -o json"), HasSubstr(comment.substr(2, 50)));
}

}  // namespace
}  // namespace deepnet::testing
