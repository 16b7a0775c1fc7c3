#include "worker/host_resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/worker/worker_test_util.h"

namespace deepnet::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fake /proc/driver/nvidia/gpus with two devices listed out of bus order.
class HostFactsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AddGpu("0000:c1:00.0", "NVIDIA H100 80GB HBM3");
    AddGpu("0000:41:00.0", "NVIDIA A100-SXM4-40GB");
  }
  void AddGpu(const std::string& bus, const std::string& model) {
    const auto folder = std::filesystem::path(dir_.path()) / bus;
    std::filesystem::create_directories(folder);
    std::ofstream(folder / "information") << "Model: \t\t " << model << "\nIRQ:   123\n";
  }
  testing::TempDir dir_;
};

TEST_F(HostFactsTest, ListsGpusInBusOrder) {
  EXPECT_THAT(DetectGpus(dir_.path(), std::nullopt),
              ElementsAre("NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"));
}

TEST_F(HostFactsTest, CudaVisibleDevicesSelectsAndReorders) {
  EXPECT_THAT(DetectGpus(dir_.path(), std::string("1")), ElementsAre("NVIDIA H100 80GB HBM3"));
  EXPECT_THAT(DetectGpus(dir_.path(), std::string("1,0")),
              ElementsAre("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"));
  EXPECT_TRUE(DetectGpus(dir_.path(), std::string("")).empty());
  EXPECT_THAT(DetectGpus(dir_.path(), std::string("0,7,1")), ElementsAre("NVIDIA A100-SXM4-40GB"));
}

TEST_F(HostFactsTest, BusIdsFollowTheGpuOrder) {
  EXPECT_THAT(DetectGpuBusIds(dir_.path(), std::nullopt),
              ElementsAre("0000:41:00.0", "0000:c1:00.0"));
  EXPECT_THAT(DetectGpuBusIds(dir_.path(), std::string("1")), ElementsAre("0000:c1:00.0"));
  // No NVML here (or no such device): unknown, never an error.
  EXPECT_THAT(GpuMemoryBytes({"0000:ff:1f.7"}), ElementsAre(0));
}

// On a machine with the NVIDIA driver, every visible GPU's memory is read through NVML.
TEST(SlotMemoryTest, RealGpusReportTheirMemoryThroughNvml) {
  const std::vector<std::string> bus_ids =
      DetectGpuBusIds("/proc/driver/nvidia/gpus", std::nullopt);
  if (bus_ids.empty()) GTEST_SKIP() << "no NVIDIA GPU on this machine";
  for (int64_t bytes : GpuMemoryBytes(bus_ids)) EXPECT_GT(bytes, int64_t{1} << 30);
}

TEST_F(HostFactsTest, CgroupMemoryLimitV2AndV1) {
  const std::string root = dir_.path() + "/cg";
  std::filesystem::create_directories(root + "/pods/w1");
  std::ofstream(root + "/pods/w1/memory.max") << "8589934592\n";
  std::ofstream(dir_.path() + "/self_v2") << "0::/pods/w1\n";
  EXPECT_EQ(CgroupMemoryLimit(dir_.path() + "/self_v2", root), int64_t{8} << 30);
  std::ofstream(root + "/pods/w1/memory.max") << "max\n";
  EXPECT_EQ(CgroupMemoryLimit(dir_.path() + "/self_v2", root), 0);

  std::filesystem::create_directories(root + "/memory/job");
  std::ofstream(root + "/memory/job/memory.limit_in_bytes") << "4294967296\n";
  std::ofstream(dir_.path() + "/self_v1") << "5:cpu,cpuacct:/job\n4:memory:/job\n";
  EXPECT_EQ(CgroupMemoryLimit(dir_.path() + "/self_v1", root), int64_t{4} << 30);
  std::ofstream(root + "/memory/job/memory.limit_in_bytes") << "9223372036854771712\n";
  EXPECT_EQ(CgroupMemoryLimit(dir_.path() + "/self_v1", root), 0);
  EXPECT_EQ(CgroupMemoryLimit(dir_.path() + "/absent", root), 0);
}

TEST(SlotMemoryTest, FlagGpuAndHostShares) {
  std::vector<SlotInfo> cpu = *PlanSlots(4, 0);
  EXPECT_EQ(AssignSlotMemory(&cpu, 0, int64_t{64} << 30, {}), "host");
  EXPECT_EQ(cpu[3].memory_bytes, int64_t{16} << 30);
  EXPECT_EQ(AssignSlotMemory(&cpu, 1000, int64_t{64} << 30, {}), "flag");
  EXPECT_EQ(cpu[0].memory_bytes, 1000);
  EXPECT_EQ(AssignSlotMemory(&cpu, 0, 0, {}), "unknown");
  EXPECT_EQ(cpu[0].memory_bytes, 0);

  std::vector<SlotInfo> gpu = *PlanSlots(0, 2);
  EXPECT_EQ(AssignSlotMemory(&gpu, 0, int64_t{64} << 30, {int64_t{80} << 30, int64_t{40} << 30}),
            "gpu");
  EXPECT_EQ(gpu[0].memory_bytes, int64_t{80} << 30);
  EXPECT_EQ(gpu[1].memory_bytes, int64_t{40} << 30);
  EXPECT_EQ(AssignSlotMemory(&gpu, 0, int64_t{64} << 30, {int64_t{80} << 30, 0}), "unknown");
  EXPECT_EQ(AssignSlotMemory(&gpu, 0, int64_t{64} << 30, {}), "unknown");
}

TEST_F(HostFactsTest, NoDriverMeansNoGpus) {
  EXPECT_TRUE(DetectGpus(dir_.path() + "/absent", std::nullopt).empty());
}

TEST(PlanSlotsTest, DefaultsToOneSlotPerGpuElseOneCpuSlot) {
  auto gpu = PlanSlots(0, 2);
  ASSERT_TRUE(gpu.ok());
  ASSERT_EQ(gpu->size(), 2u);
  EXPECT_TRUE((*gpu)[1].cuda);
  EXPECT_EQ((*gpu)[1].device_index, 1);
  auto cpu = PlanSlots(0, 0);
  ASSERT_TRUE(cpu.ok());
  ASSERT_EQ(cpu->size(), 1u);
  EXPECT_FALSE((*cpu)[0].cuda);
  EXPECT_EQ((*cpu)[0].device_index, -1);
  auto three = PlanSlots(3, 0);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->size(), 3u);
}

TEST(PlanSlotsTest, RejectsMoreSlotsThanGpus) {
  auto slots = PlanSlots(3, 2);
  ASSERT_FALSE(slots.ok());
  EXPECT_THAT(slots.status().message(), HasSubstr("--slots"));
  EXPECT_FALSE(PlanSlots(-1, 0).ok());
}

TEST(TrainerVisibleDevicesTest, MapsTheSlotThroughTheDaemonsOwnList) {
  EXPECT_EQ(*TrainerVisibleDevices(std::nullopt, 3), "3");
  EXPECT_EQ(*TrainerVisibleDevices("4,6", 1), "6");
  EXPECT_EQ(*TrainerVisibleDevices(" 2 , 5 ", 0), "2");
  EXPECT_EQ(*TrainerVisibleDevices("GPU-11aa,MIG-22bb", 1), "MIG-22bb");
  for (const auto& [list, index] :
       std::vector<std::pair<std::string, int>>{{"4,6", 2}, {"", 0}, {"4,,6", 1}}) {
    auto visible = TrainerVisibleDevices(list, index);
    ASSERT_FALSE(visible.ok()) << list << " " << index;
    EXPECT_THAT(visible.status().message(), HasSubstr("CUDA_VISIBLE_DEVICES=\"" + list));
  }
  EXPECT_FALSE(TrainerVisibleDevices(std::nullopt, -1).ok());
}

TEST(TrainerVisibleDevicesTest, AssignsEveryCudaSlotAndLeavesCpuSlots) {
  std::vector<SlotInfo> gpu = *PlanSlots(0, 2);
  ASSERT_TRUE(AssignTrainerDevices(&gpu, std::string("7,3")).ok());
  EXPECT_EQ(gpu[0].cuda_visible_devices, "7");
  EXPECT_EQ(gpu[1].cuda_visible_devices, "3");
  std::vector<SlotInfo> cpu = *PlanSlots(2, 0);
  ASSERT_TRUE(AssignTrainerDevices(&cpu, std::string("0")).ok());
  EXPECT_EQ(cpu[1].cuda_visible_devices, "");
  EXPECT_FALSE(AssignTrainerDevices(&gpu, std::string("GPU-1")).ok());  // Slot 1 has no entry.
}

TEST(DetectHostFactsTest, FillsTheMachine) {
  const HostFacts facts = DetectHostFacts("10.1.2.3", {"gpu"}, "v1", "1.13.1");
  EXPECT_FALSE(facts.hostname.empty());
  EXPECT_EQ(facts.address, "10.1.2.3");
  EXPECT_GE(facts.cpu_count, 1);
  EXPECT_GT(facts.memory_bytes, 0);
  EXPECT_THAT(facts.gpu_names, ElementsAre("gpu"));
  EXPECT_FALSE(DetectHostFacts("", {}, "v1", "").address.empty());
}

}  // namespace
}  // namespace deepnet::worker
