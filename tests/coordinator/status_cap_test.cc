// Status messages leaving a service are capped (rpc::ToGrpc), on a UTF-8 boundary.
#include <grpcpp/support/status.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"
#include "rpc/rpc_util.h"

namespace deepnet::rpc {
namespace {

using ::testing::EndsWith;

TEST(StatusCapTest, LongMessagesAreTruncatedOnACharacterBoundary) {
  // "é" is two bytes: a cut in the middle of one backs up to its first byte.
  std::string text;
  for (int i = 0; i < 10000; ++i) text += "\xC3\xA9";
  const grpc::Status status = ToGrpc(absl::InvalidArgumentError(text));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const std::string& message = status.error_message();
  EXPECT_LE(message.size(), kMaxStatusMessageBytes);
  EXPECT_GT(message.size(), kMaxStatusMessageBytes - 8);
  EXPECT_THAT(message, EndsWith("... (truncated)"));
  const std::string kept = message.substr(0, message.size() - 15);
  EXPECT_EQ(kept.size() % 2, 0u);
  EXPECT_EQ(kept, text.substr(0, kept.size()));
}

TEST(StatusCapTest, ShortMessagesAndOkAreUnchanged) {
  EXPECT_EQ(ToGrpc(absl::NotFoundError("job j-1 does not exist")).error_message(),
            "job j-1 does not exist");
  EXPECT_TRUE(ToGrpc(absl::OkStatus()).ok());
  EXPECT_EQ(TruncateMessage(std::string(4096, 'a')), std::string(4096, 'a'));
  EXPECT_EQ(TruncateMessage(std::string(4097, 'a')).size(), 4096u);
}

}  // namespace
}  // namespace deepnet::rpc
