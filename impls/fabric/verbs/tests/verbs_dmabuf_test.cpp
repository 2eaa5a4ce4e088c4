// Which registration the verbs fabric chooses for device memory and the `staging` text it reports
// (verbs_dmabuf.hpp, docs/devices.md "Memory kinds"); no GPU or RDMA device is needed. The expected texts are
// written out here, from the contract.
#include "impls/fabric/verbs/verbs_dmabuf.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "impls/device/cpu/cpu_device.hpp"

namespace eps::fabric::verbs {
namespace {

using device::HmemInterface;

TEST(VerbsMemoryPlan, HostMemoryRegistersWithRegMr) {
  for (HmemInterface iface : {HmemInterface::kNone, HmemInterface::kSystem}) {
    const VerbsMemoryPlan plan = plan_verbs_memory(iface, "cpu:0", false, false);
    EXPECT_EQ(plan.kind, VerbsRegistration::kHost);
    EXPECT_EQ(plan.staging(), "none");
  }
}

TEST(VerbsMemoryPlan, GpuMemoryThatExportsRegistersAsDmaBuf) {
  for (HmemInterface iface : {HmemInterface::kCuda, HmemInterface::kRocr}) {
    const VerbsMemoryPlan plan = plan_verbs_memory(iface, "cuda:0", true, true);
    EXPECT_EQ(plan.kind, VerbsRegistration::kDmaBuf);
    EXPECT_EQ(plan.staging(), "dma-buf");
  }
}

TEST(VerbsMemoryPlan, GpuWithoutExportStagesAndSaysWhy) {
  const VerbsMemoryPlan plan = plan_verbs_memory(HmemInterface::kRocr, "hip:1", false, true);
  EXPECT_EQ(plan.kind, VerbsRegistration::kStaged);
  EXPECT_EQ(plan.staging(), "host-staging: hip:1 does not export its memory as dma-buf");
}

TEST(VerbsMemoryPlan, LibraryWithoutRegDmabufStagesAndSaysWhy) {
  const VerbsMemoryPlan plan = plan_verbs_memory(HmemInterface::kCuda, "cuda:0", true, false);
  EXPECT_EQ(plan.kind, VerbsRegistration::kStaged);
  EXPECT_EQ(plan.staging(),
            "host-staging: libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34 or newer has it)");
}

TEST(VerbsMemoryPlan, FromADevice) {
  const VerbsApi with_dmabuf = [] {
    VerbsApi api{};
    api.reg_dmabuf_mr = [](ibv_pd*, std::uint64_t, std::size_t, std::uint64_t, int, int) -> ibv_mr* {
      return nullptr;
    };
    return api;
  }();
  EXPECT_EQ(plan_verbs_memory(nullptr, with_dmabuf).staging(), "none");
  device::CpuDeviceOptions options;
  options.system_hmem = true;
  std::unique_ptr<device::Device> cpu = value_or_throw(device::make_cpu_device(options));
  EXPECT_EQ(plan_verbs_memory(cpu.get(), with_dmabuf).staging(), "none");
}

// rdma-core 44 (what this machine has) exports ibv_reg_dmabuf_mr; the loader finds it.
TEST(VerbsDmaBuf, LibibverbsHasRegDmabufMr) {
  Result<const VerbsApi*> api = verbs_api();
  ASSERT_TRUE(api.ok()) << api.status().message();
  EXPECT_NE((*api)->reg_dmabuf_mr, nullptr);
}

TEST(VerbsDmaBuf, RegistrationWithoutTheCallIsRefused) {
  std::unique_ptr<device::Device> cpu = value_or_throw(device::make_cpu_device());
  std::vector<std::byte> memory(64);
  const Result<ibv_mr*> mr = register_dma_buf(VerbsApi{}, nullptr, *cpu, memory.data(), memory.size(), 0);
  EXPECT_EQ(mr.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mr.status().message().find("ibv_reg_dmabuf_mr"), std::string::npos) << mr.status().message();
}

// The export comes first: a device that cannot export fails with its reason and the NIC is never asked.
TEST(VerbsDmaBuf, DeviceThatCannotExportIsReportedBeforeRegistration) {
  static int registrations = 0;
  VerbsApi api{};
  api.reg_dmabuf_mr = [](ibv_pd*, std::uint64_t, std::size_t, std::uint64_t, int, int) -> ibv_mr* {
    ++registrations;
    return nullptr;
  };
  std::unique_ptr<device::Device> cpu = value_or_throw(device::make_cpu_device());
  std::vector<std::byte> memory(64);
  const Result<ibv_mr*> mr = register_dma_buf(api, nullptr, *cpu, memory.data(), memory.size(), 0);
  EXPECT_EQ(mr.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(mr.status().message(),
            "cpu device: its memory is host memory, which has no dma-buf to export (fabrics register it "
            "directly)");
  EXPECT_EQ(registrations, 0);
}

}  // namespace
}  // namespace eps::fabric::verbs
