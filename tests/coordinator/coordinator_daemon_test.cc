// deepnet-coordinator as a process (label `service`): a bad --limits-file or --audit-log stops it
// at start naming the file and the field; SIGHUP reloads the limits and the tokens (a bad file
// keeps the ones in force); an expired token reaches deepnetctl's user as the coordinator's "expired at" message.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "deepnet/v1/job_service.grpc.pb.h"
#include "tests/file_text.h"
#include "tests/integration/child_process.h"
#include "tests/temp_dir.h"

namespace deepnet::coordinator {
namespace {

namespace v1 = deepnet::v1;
using deepnet::testing::Child;
using deepnet::testing::ReadText;
using deepnet::testing::TempDir;
using deepnet::testing::WriteText;
using ::testing::HasSubstr;

constexpr const char* kAlice = "alice-token-0123456789";
constexpr const char* kOld = "old-token-01234567890a";

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

class CoordinatorDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteText(dir_ / "tokens", std::string(kAlice) + " alice\n" + kOld +
                                   " olduser user expires=2020-01-01T00:00:00Z\n");
  }

  std::vector<std::string> Args(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {DEEPNET_COORDINATOR_BINARY,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--metrics-listen",
                                     "",
                                     "--db",
                                     dir_ / "coordinator.db",
                                     "--tokens-file",
                                     dir_ / "tokens",
                                     "--port-file",
                                     dir_ / "ports",
                                     "--no-check-paths"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // Starts the coordinator; its gRPC address once it serves, "" otherwise.
  std::string Start(const std::vector<std::string>& extra) {
    coordinator_ = std::make_unique<Child>(Args(extra), dir_ / "coordinator.log");
    if (!WaitFor([&] { return std::filesystem::exists(dir_ / "ports"); },
                 std::chrono::seconds(30))) {
      return "";
    }
    const std::string ports = ReadText(dir_ / "ports");
    const size_t at = ports.find("grpc=");
    if (at == std::string::npos) return "";
    const std::string address = "127.0.0.1:" + std::to_string(std::stoi(ports.substr(at + 5)));
    stub_ =
        v1::JobService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    return address;
  }

  grpc::Status Submit(int priority) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    context.AddMetadata("authorization", std::string("Bearer ") + kAlice);
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_config_yaml(
        "name: fair\nmodel: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, "
        "ffn_dim: 32}\ntrain: {max_steps: 1}\nscheduling: {priority: " +
        std::to_string(priority) + "}\n");
    v1::SubmitJobResponse response;
    return stub_->SubmitJob(&context, request, &response);
  }

  TempDir dir_;
  std::unique_ptr<Child> coordinator_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(CoordinatorDaemonTest, BadLimitsFileOrAuditLogStopsItAtStartNamingThem) {
  WriteText(dir_ / "limits.yaml", "default: {max_priority: high}\n");
  Child bad_limits(Args({"--limits-file", dir_ / "limits.yaml"}), dir_ / "bad1.log");
  EXPECT_NE(bad_limits.Wait(std::chrono::seconds(60)), 0);
  EXPECT_THAT(ReadText(dir_ / "bad1.log"),
              HasSubstr("--limits-file: " + (dir_ / "limits.yaml") + ": default.max_priority"));

  Child missing(Args({"--limits-file", dir_ / "absent.yaml"}), dir_ / "bad2.log");
  EXPECT_NE(missing.Wait(std::chrono::seconds(60)), 0);
  EXPECT_THAT(ReadText(dir_ / "bad2.log"), HasSubstr(dir_ / "absent.yaml"));

  Child bad_retention(Args({"--retain-finished", "30x"}), dir_ / "bad4.log");
  EXPECT_NE(bad_retention.Wait(std::chrono::seconds(60)), 0);
  EXPECT_THAT(ReadText(dir_ / "bad4.log"), HasSubstr("--retain-finished \"30x\""));

  Child bad_audit(Args({"--audit-log", dir_ / "no/such/dir/audit.log"}), dir_ / "bad3.log");
  EXPECT_NE(bad_audit.Wait(std::chrono::seconds(60)), 0);
  EXPECT_THAT(ReadText(dir_ / "bad3.log"),
              HasSubstr("--audit-log " + (dir_ / "no/such/dir/audit.log")));
}

TEST_F(CoordinatorDaemonTest, SighupReloadsTheLimitsAndABadFileKeepsThoseInForce) {
  WriteText(dir_ / "limits.yaml", "default: {max_priority: 1}\n");
  ASSERT_NE(Start({"--limits-file", dir_ / "limits.yaml", "--audit-log", dir_ / "audit.log"}), "");
  grpc::Status refused = Submit(5);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("max_priority 1 of user alice"));

  WriteText(dir_ / "limits.yaml", "default: {max_priority: 10}\n");
  kill(coordinator_->pid(), SIGHUP);
  EXPECT_TRUE(WaitFor([&] { return Submit(5).ok(); }, std::chrono::seconds(30)));

  WriteText(dir_ / "limits.yaml", "default: {max_priority: [\n");
  kill(coordinator_->pid(), SIGHUP);
  EXPECT_TRUE(WaitFor(
      [&] {
        return ReadText(dir_ / "coordinator.log").find("keeping the limits") != std::string::npos;
      },
      std::chrono::seconds(30)));
  EXPECT_TRUE(Submit(10).ok());
  EXPECT_EQ(Submit(11).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  const std::string audit = ReadText(dir_ / "audit.log");
  EXPECT_THAT(audit, HasSubstr("\"outcome\":\"PERMISSION_DENIED\""));
  EXPECT_THAT(audit, HasSubstr("\"user\":\"alice\""));
}

// Revoking a token needs no restart: SIGHUP re-reads the tokens file; a bad file keeps the
// tokens in force.
TEST_F(CoordinatorDaemonTest, SighupReloadsTheTokensFileAndABadOneKeepsTheTokens) {
  ASSERT_NE(Start({}), "");
  ASSERT_TRUE(Submit(0).ok());
  WriteText(dir_ / "tokens", "not a tokens line\n");
  kill(coordinator_->pid(), SIGHUP);
  EXPECT_TRUE(WaitFor(
      [&] {
        return ReadText(dir_ / "coordinator.log").find("keeping the tokens") != std::string::npos;
      },
      std::chrono::seconds(30)));
  EXPECT_TRUE(Submit(0).ok());
  WriteText(dir_ / "tokens", std::string(kOld) + " olduser\n");  // alice's token removed
  kill(coordinator_->pid(), SIGHUP);
  EXPECT_TRUE(WaitFor([&] { return Submit(0).error_code() == grpc::StatusCode::UNAUTHENTICATED; },
                      std::chrono::seconds(30)));
}

TEST_F(CoordinatorDaemonTest, DeepnetctlShowsWhenAnExpiredTokenExpired) {
  const std::string address = Start({});
  ASSERT_NE(address, "");
  Child ctl({DEEPNETCTL_BINARY, "--coordinator", address, "--token", kOld, "list"},
            dir_ / "ctl.log");
  EXPECT_EQ(ctl.Wait(std::chrono::seconds(60)), 5);  // docs/CLI.md: UNAUTHENTICATED
  EXPECT_THAT(ReadText(dir_ / "ctl.log"),
              HasSubstr("UNAUTHENTICATED: the token of user 'olduser' expired at "
                        "2020-01-01T00:00:00"));
}

}  // namespace
}  // namespace deepnet::coordinator
