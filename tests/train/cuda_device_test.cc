#include "train/cuda_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

namespace deepnet::train {
namespace {

using ::testing::HasSubstr;

TEST(PinRankDeviceTest, LeavesNonCudaDevicesAlone) {
  auto device = PinRankDevice(*job::ParseDevice("cpu"), comm::LaunchEnv{});
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(job::ToString(device->device), "cpu");
  EXPECT_EQ(device->cuda_index, -1);
}

TEST(PinRankDeviceTest, ResolvesCudaToOneOrdinal) {
  comm::LaunchEnv env;
  env.local_rank = 3;
  env.local_size = 4;
  auto device = PinRankDevice(*job::ParseDevice("cuda"), env);
  const int visible = static_cast<int>(torch::cuda::device_count());
  if (visible == 0) {
    ASSERT_FALSE(device.ok());
    EXPECT_THAT(std::string(device.status().message()), HasSubstr("no CUDA device"));
    return;
  }
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->cuda_index, 3 % visible);
  EXPECT_EQ(job::ToString(device->device), "cuda:" + std::to_string(3 % visible));
}

TEST(PinRankDeviceTest, KeepsAnExplicitOrdinal) {
  if (torch::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: set_device not tried";
  auto device = PinRankDevice(*job::ParseDevice("cuda:0"), comm::LaunchEnv{});
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(job::ToString(device->device), "cuda:0");
  EXPECT_EQ(device->cuda_index, 0);
}

TEST(CudaMemoryTest, IsZeroWithoutADevice) {
  const GpuMemory none = CudaMemory(-1);
  EXPECT_EQ(none.allocated, 0);
  EXPECT_EQ(none.reserved, 0);
  EXPECT_EQ(none.peak_allocated, 0);
  if (torch::cuda::device_count() == 0) {
    EXPECT_EQ(CudaMemory(0).reserved, 0);
  }
}

}  // namespace
}  // namespace deepnet::train
