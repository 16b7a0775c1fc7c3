// The real deepnetctl binary as a subprocess against an in-process FakeJobService: the exit
// codes scripts see, and that global flags and the environment reach it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/ctl/fake_job_service.h"
#include "tests/loopback.h"

namespace deepnet::ctl {
namespace {

using testing::MakeJob;
using testing::Snapshot;
using testing::StateChange;

// Runs the binary with `args` and `env` (plus PATH), its standard output to `out_path` (empty:
// /dev/null) and its standard error to /dev/null; returns its exit status, or -1 if it had to
// be killed after 60 s (it must never hang).
int RunBinary(const std::vector<std::string>& args, const std::vector<std::string>& env,
              const std::string& out_path = "") {
  std::vector<char*> argv;
  std::string binary = DEEPNETCTL_BINARY;
  argv.push_back(binary.data());
  std::vector<std::string> args_copy = args;
  for (auto& a : args_copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  env_copy.push_back("PATH=/usr/bin:/bin");
  std::vector<char*> envp;
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int null = open("/dev/null", O_WRONLY);
    const int out = out_path.empty() ? null : open(out_path.c_str(), O_WRONLY | O_TRUNC);
    dup2(out, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(DeepnetctlBinaryTest, ControlCharactersFromOthersReachTheTerminalEscaped) {
  testing::FakeServer server;
  ASSERT_TRUE(server.ok());
  testing::FakeJobService& fake = server.service();
  fake.job = MakeJob("j-1", v1::JOB_STATE_RUNNING);
  // A name and a reason as another user's job (or its trainer) could make them: clear the
  // screen, an 8-bit CSI, a carriage return that would overwrite the line.
  fake.job.mutable_spec()->set_name("evil\x1b[2J\xc2\x9b" "31m\rok");
  fake.job.set_message("rank 0 said \x07\x1b]0;title\x07 bye");
  char path[] = "/tmp/deepnetctl-out-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_EQ(RunBinary({"get", "j-1", "--coordinator", server.address()}, {}, path), 0);
  std::string text;
  {
    FILE* f = fopen(path, "rb");
    ASSERT_NE(f, nullptr);
    char buffer[4096];
    size_t n = 0;
    while ((n = fread(buffer, 1, sizeof(buffer), f)) > 0) text.append(buffer, n);
    fclose(f);
  }
  unlink(path);
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    EXPECT_TRUE(u >= 0x20 || c == '\n' || c == '\t') << "control byte " << int(u) << " in:\n"
                                                       << text;
    EXPECT_NE(u, 0x7F);
  }
  EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos) << text;
  EXPECT_THAT(text, ::testing::HasSubstr("evil\\x1b[2J\\u009b31m\\x0dok"));
  EXPECT_THAT(text, ::testing::HasSubstr("\\x07\\x1b]0;title\\x07"));
}

TEST(DeepnetctlBinaryTest, ExitCodesAsDocumented) {
  testing::FakeServer server;
  ASSERT_TRUE(server.ok());
  testing::FakeJobService& fake = server.service();
  fake.job = MakeJob("j-1", v1::JOB_STATE_RUNNING);
  const std::string env = "DEEPNET_COORDINATOR=" + server.address();

  EXPECT_EQ(RunBinary({"--help"}, {}), 0);
  EXPECT_EQ(RunBinary({"get", "j-1"}, {env}), 0);
  EXPECT_EQ(RunBinary({"get", "j-1", "--coordinator", server.address(), "-o", "json"}, {}), 0);
  EXPECT_EQ(RunBinary({"frobnicate"}, {env}), 2);
  EXPECT_EQ(RunBinary({"submit", "/nonexistent/job.yaml"}, {env}), 2);

  fake.fail_count = 1;
  fake.fail_status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "model.layers: must be > 0");
  EXPECT_EQ(RunBinary({"cancel", "j-1"}, {env}), 3);
  fake.fail_count = 1;
  fake.fail_status = grpc::Status(grpc::StatusCode::NOT_FOUND, "job j-2 does not exist");
  EXPECT_EQ(RunBinary({"get", "j-2"}, {env}), 4);
  fake.fail_count = 1;
  fake.fail_status = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no valid token");
  EXPECT_EQ(RunBinary({"get", "j-1", "--token", "wrong"}, {env}), 5);
  fake.fail_count = 1;
  fake.fail_status = grpc::Status(grpc::StatusCode::INTERNAL, "disk on fire");
  EXPECT_EQ(RunBinary({"checkpoints", "j-1"}, {env}), 7);
  EXPECT_EQ(fake.authorization.back(), "");
  EXPECT_EQ(fake.authorization[fake.authorization.size() - 2], "Bearer wrong");

  fake.watch_scripts = {
      {{Snapshot(fake.job), StateChange(3, v1::JOB_STATE_RUNNING, v1::JOB_STATE_FAILED)}}};
  EXPECT_EQ(RunBinary({"watch", "j-1"}, {env}), 1);
  fake.watch_scripts = {
      {{Snapshot(fake.job), StateChange(3, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED)}}};
  EXPECT_EQ(RunBinary({"watch", "j-1"}, {env}), 0);

  fake.log_messages = {};
  fake.logs_end = grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "job j-1 belongs to alice");
  EXPECT_EQ(RunBinary({"logs", "j-1"}, {env}), 5);
  fake.logs_end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker w-1 is lost");
  EXPECT_EQ(RunBinary({"logs", "j-1", "--follow"}, {env}), 6);
  fake.logs_end = grpc::Status::OK;
  EXPECT_EQ(RunBinary({"logs", "j-1", "--rank", "1", "--follow"}, {env}), 0);
  EXPECT_EQ(RunBinary({"logs", "j-1", "--rank", "x"}, {env}), 2);

  const std::string nowhere =
      "127.0.0.1:" + std::to_string(deepnet::testing::UnusedLoopbackPort());
  EXPECT_EQ(RunBinary({"get", "j-1", "--coordinator", nowhere, "--timeout", "2s"}, {}), 6);
}

}  // namespace
}  // namespace deepnet::ctl
