#include "rpc/health_check_client.h"

#include <grpcpp/grpcpp.h>

#include <future>
#include <string>
#include <utility>
#include <vector>

namespace deepnet::rpc {
namespace {

// The `status` field (1, a varint) of an encoded HealthCheckResponse; UNKNOWN when absent. The
// message has that one field: tag 0x08, then a varint that fits one byte.
int DecodeServingStatus(grpc::ByteBuffer& response) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  if (bytes.size() >= 2 && bytes[0] == '\x08') return static_cast<unsigned char>(bytes[1]);
  return kServingStatusUnknown;
}

}  // namespace

const char* ServingStatusName(int serving_status) {
  switch (serving_status) {
    case 0:
      return "UNKNOWN";
    case 1:
      return "SERVING";
    case 2:
      return "NOT_SERVING";
    case 3:
      return "SERVICE_UNKNOWN";
    default:
      return "an unknown status";
  }
}

HealthCheckClient::HealthCheckClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(std::move(channel)) {}

HealthAnswer HealthCheckClient::Check(std::chrono::system_clock::time_point deadline) {
  grpc::ClientContext context;
  context.set_deadline(deadline);
  grpc::Slice empty(std::string{});  // HealthCheckRequest{service: ""}: the whole server.
  const grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub_.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                  &response, [&done](grpc::Status status) { done.set_value(std::move(status)); });
  HealthAnswer answer;
  answer.status = done.get_future().get();
  if (answer.status.ok()) answer.serving_status = DecodeServingStatus(response);
  return answer;
}

}  // namespace deepnet::rpc
