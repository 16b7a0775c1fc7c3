// `deepnetctl health`: the standard gRPC health check against a real server (SERVING,
// NOT_SERVING) and against a port nothing listens on, through the whole tool in-process.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ctl/ctl_app.h"
#include "tests/ctl/run_ctl.h"
#include "ctl/exit_codes.h"
#include "tests/loopback.h"

namespace deepnet::ctl {
namespace {

using ::testing::HasSubstr;

class HealthCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override { server_->Shutdown(); }

  int Run(std::vector<std::string> args) {
    return testing::RunCtlQuietEnv(std::move(args), out_, err_);
  }

  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(HealthCheckTest, ServingWithoutAToken) {
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  EXPECT_EQ(Run({"health", address}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "SERVING\n");
  // The address may come from --coordinator as for every other command.
  EXPECT_EQ(Run({"--coordinator", address, "health"}), kExitOk) << err_.str();
}

// A probe's environment may name a token file it cannot read: the health check needs none.
TEST_F(HealthCheckTest, ATokenFileThatCannotBeReadDoesNotMatter) {
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  EXPECT_EQ(Run({"--token-file", "/nonexistent/token", "health", address}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "SERVING\n");
}

TEST_F(HealthCheckTest, NotServingIsAnError) {
  server_->GetHealthCheckService()->SetServingStatus(false);
  EXPECT_EQ(Run({"health", "127.0.0.1:" + std::to_string(port_)}), kExitOther);
  EXPECT_THAT(err_.str(), HasSubstr("NOT_SERVING"));
  EXPECT_EQ(out_.str(), "");
}

TEST_F(HealthCheckTest, NothingListeningIsUnreachable) {
  const int closed = ::deepnet::testing::UnusedLoopbackPort();
  ASSERT_GT(closed, 0);
  EXPECT_EQ(Run({"health", "127.0.0.1:" + std::to_string(closed), "--timeout", "2s"}),
            kExitUnreachable);
  EXPECT_THAT(err_.str(), HasSubstr("deepnetctl: health:"));
}

}  // namespace
}  // namespace deepnet::ctl
