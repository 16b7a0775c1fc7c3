#pragma once
// Request bytes a server parses itself (gRPC raw methods) so that a bad request is answered
// INVALID_ARGUMENT naming the field, instead of the INTERNAL with an empty message gRPC gives
// when a proto3 string field holds invalid UTF-8.

#include <cstddef>
#include <vector>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace grpc {
class ByteBuffer;
}  // namespace grpc

namespace deepnet::rpc {

struct RequestCheckOptions {
  // Most bytes any string field may hold, except those in `long_fields`.
  size_t max_string_bytes = 4096;
  // Fields exempt from max_string_bytes, by full name (e.g. "deepnet.v1.JobSpec.config_yaml"):
  // the handler checks their size itself.
  std::vector<std::string> long_fields;
};

// Parses `bytes` into `*out`. Every string field, nested and in maps included, must be valid
// UTF-8, hold no NUL byte and fit options.max_string_bytes; INVALID_ARGUMENT naming the first
// field that does not ("job_id: invalid UTF-8 at byte 3", "labels[\"team\"]: contains a NUL
// byte at byte 2", "owner: 5000 bytes, more than the 4096 allowed"), or saying the bytes are
// no <message type> at all.
[[nodiscard]] absl::Status ParseRequest(absl::string_view bytes, google::protobuf::Message* out,
                                        const RequestCheckOptions& options = {});
[[nodiscard]] absl::Status ParseRequest(const grpc::ByteBuffer& buffer,
                                        google::protobuf::Message* out,
                                        const RequestCheckOptions& options = {});

// Serializes `message` into `*out` (a raw method's response).
void SerializeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* out);

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF); *bad_offset gets the first bad byte when not.
bool IsValidUtf8(absl::string_view text, size_t* bad_offset = nullptr);

}  // namespace deepnet::rpc
