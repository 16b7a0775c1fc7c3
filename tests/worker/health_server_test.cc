#include "worker/health_server.h"

#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>

namespace deepnet::worker {
namespace {

using ::testing::HasSubstr;

TEST(HealthServerTest, AnswersServingAndRefusesAPortInUse) {
  int port = 0;
  auto server = StartHealthServer("127.0.0.1:0", &port);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT(port, 0);

  // grpc.health.v1.Health/Check with an empty request (the whole server); the answer
  // HealthCheckResponse{status: SERVING} is the two bytes 0x08 0x01.
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(status); });
  const grpc::Status status = done.get_future().get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));

  auto second = StartHealthServer("127.0.0.1:" + std::to_string(port), nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("--listen"));
  (*server)->Shutdown();
}

}  // namespace
}  // namespace deepnet::worker
