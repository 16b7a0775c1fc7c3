#include "ctl/health_check.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <string>
#include <vector>

#include "ctl/exit_codes.h"

namespace deepnet::ctl {
namespace {

// grpc.health.v1.HealthCheckResponse.ServingStatus.
const char* ServingStatusName(int value) {
  switch (value) {
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

// The `status` field (1, a varint) of an encoded HealthCheckResponse; 0 (UNKNOWN) when absent.
int ServingStatus(const std::string& bytes) {
  // The message has that one field: tag 0x08, then a varint that fits one byte.
  if (bytes.size() >= 2 && bytes[0] == '\x08') return static_cast<unsigned char>(bytes[1]);
  return 0;
}

}  // namespace

int RunHealth(const std::shared_ptr<grpc::Channel>& channel, std::chrono::milliseconds timeout,
              std::ostream& out, std::ostream& err) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       (timeout.count() > 0 ? timeout : std::chrono::seconds(30)));
  grpc::Slice empty(std::string{});  // HealthCheckRequest{service: ""}: the whole server.
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) {
    err << "deepnetctl: health: " << status.error_message() << std::endl;
    return ExitCodeFor(status.error_code());
  }
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  const int serving = ServingStatus(bytes);
  if (serving != 1) {
    err << "deepnetctl: health: the server answered " << ServingStatusName(serving) << std::endl;
    return kExitOther;
  }
  out << "SERVING" << std::endl;
  return kExitOk;
}

}  // namespace deepnet::ctl
