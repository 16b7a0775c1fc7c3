#include "worker/health_server.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "rpc/health_check_client.h"

namespace deepnet::worker {
namespace {

using ::testing::HasSubstr;

TEST(HealthServerTest, AnswersServingAndRefusesAPortInUse) {
  int port = 0;
  auto server = StartHealthServer("127.0.0.1:0", &port);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT(port, 0);

  // grpc.health.v1.Health/Check for the whole server answers SERVING.
  rpc::HealthCheckClient client(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  const rpc::HealthAnswer answer =
      client.Check(std::chrono::system_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(answer.status.ok()) << answer.status.error_message();
  EXPECT_EQ(answer.serving_status, rpc::kServingStatusServing);

  auto second = StartHealthServer("127.0.0.1:" + std::to_string(port), nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("--listen"));
  (*server)->Shutdown();
}

}  // namespace
}  // namespace deepnet::worker
