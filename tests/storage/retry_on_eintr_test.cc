#include "storage/retry_on_eintr.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace deepnet::storage {
namespace {

TEST(RetryOnEintrTest, RetriesInterruptedCallsUntilOneCompletes) {
  int calls = 0;
  const int rc = RetryOnEintr([&] {
    ++calls;
    if (calls < 3) {
      errno = EINTR;
      return -1;
    }
    return 7;
  });
  EXPECT_EQ(rc, 7);
  EXPECT_EQ(calls, 3);
}

TEST(RetryOnEintrTest, ReturnsOtherFailuresAtOnceWithTheirErrno) {
  int calls = 0;
  const int rc = RetryOnEintr([&] {
    ++calls;
    errno = EIO;
    return -1;
  });
  EXPECT_EQ(rc, -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(calls, 1);
}

TEST(RetryOnEintrTest, SuccessIsNotRetriedWhateverErrnoHolds) {
  int calls = 0;
  errno = EINTR;  // Left over from an earlier call: only a failure looks at errno.
  const int rc = RetryOnEintr([&] {
    ++calls;
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace deepnet::storage
