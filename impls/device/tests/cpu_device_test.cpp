// The `cpu` device (docs/devices.md): every kernel body bit-equal to reference/ on every instruction set this
// CPU has (kernel_checks.hpp), its memory and launch contract, and the registry's --device names.
#include <gtest/gtest.h>

#include "impls/device/cpu/cpu_device.hpp"
#include "impls/device/device_registry.hpp"
#include "impls/device/tests/kernel_checks.hpp"

namespace eps::device {
namespace {

class CpuKernels : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    CpuDeviceOptions options;
    options.isa = GetParam();
    options.threads = 3;  // several threads even on 2 cores: the index split must not change a bit
    device_ = value_or_throw(make_cpu_device(options));
  }
  std::unique_ptr<Device> device_;
};

TEST_P(CpuKernels, CopyRows) { EXPECT_TRUE(testing::check_copy_rows(*device_)); }
TEST_P(CpuKernels, Fp8) { EXPECT_TRUE(testing::check_fp8(*device_)); }
TEST_P(CpuKernels, Combine) { EXPECT_TRUE(testing::check_combine(*device_)); }
TEST_P(CpuKernels, Expert) { EXPECT_TRUE(testing::check_expert(*device_)); }
TEST_P(CpuKernels, Fills) { EXPECT_TRUE(testing::check_fills(*device_)); }
TEST_P(CpuKernels, SumRows) { EXPECT_TRUE(testing::check_sum_rows(*device_)); }
TEST_P(CpuKernels, FifoPush) { EXPECT_TRUE(testing::check_fifo_push(*device_)); }

TEST_P(CpuKernels, RunsTheRequestedInstructionSet) {
  EXPECT_NE(device_->properties().architecture.find(cpu_isa_name(GetParam())), std::string::npos)
      << device_->properties().architecture;
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuKernels, ::testing::ValuesIn(available_cpu_isas()),
                         [](const auto& info) { return std::string(cpu_isa_name(info.param)); });

TEST(CpuDevice, RefusesEmptyAllocationsAndWrongArguments) {
  auto device = value_or_throw(make_cpu_device());
  Result<Buffer> empty = device->allocate(0, MemoryKind::kDevice);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("bytes"), std::string::npos);
  const CopyRowsArgs args;
  const Status wrong = device->launch(KernelId::kCopyRows, &args, sizeof(args) - 8);
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("copy_rows"), std::string::npos) << wrong.message();
  CpuDeviceOptions bad;
  bad.threads = 0;
  EXPECT_EQ(make_cpu_device(bad).status().code(), StatusCode::kInvalidArgument);
}

// docs/devices.md "Memory kinds": the cpu device's memory is host memory; it is FI_HMEM_SYSTEM memory only
// when declared so, and it never exports a dma-buf.
TEST(CpuDevice, MemoryIsHostMemoryWithoutDmaBuf) {
  std::unique_ptr<Device> plain = value_or_throw(make_cpu_device());
  EXPECT_EQ(plain->hmem_interface(), HmemInterface::kNone);
  EXPECT_EQ(hmem_interface_name(plain->hmem_interface()), "none");
  CpuDeviceOptions options;
  options.system_hmem = true;
  std::unique_ptr<Device> declared = value_or_throw(make_cpu_device(options));
  EXPECT_EQ(declared->hmem_interface(), HmemInterface::kSystem);
  EXPECT_EQ(hmem_interface_name(declared->hmem_interface()), "system");
  Buffer buffer = value_or_throw(plain->allocate(4096, MemoryKind::kDevice));
  const Result<DmaBuf> exported = plain->export_dma_buf(buffer.data(), buffer.bytes());
  EXPECT_EQ(exported.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(plain->export_dma_buf(nullptr, 64).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plain->export_dma_buf(buffer.data(), 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(CpuDevice, BuffersFreeThemselvesAndMove) {
  auto device = value_or_throw(make_cpu_device());
  Buffer a = value_or_throw(device->allocate(100, MemoryKind::kHost));
  EXPECT_EQ(a.bytes(), 100u);
  EXPECT_EQ(a.kind(), MemoryKind::kHost);
  void* data = a.data();
  Buffer b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), data);
}

TEST(DeviceRegistry, NamesEveryBackendAndRejectsUnknownOnes) {
  const std::vector<std::string> choices = device_choices();
  for (const char* name : {"auto", "cpu", "cuda", "hip"})
    EXPECT_NE(std::find(choices.begin(), choices.end(), name), choices.end()) << name;
  const Result<std::unique_ptr<Device>> unknown = make_device("tpu");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("--device: unknown device 'tpu'; choices: auto, cpu"),
            std::string::npos)
      << unknown.status().message();
  for (const char* bad : {"cpu:1", "cuda:x", "cuda:-1", "cuda:"}) {
    EXPECT_EQ(make_device(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(value_or_throw(make_device("cpu"))->properties().backend, "cpu");
}

// Without a GPU here, `auto` falls back to the cpu device; with one it picks the GPU.
TEST(DeviceRegistry, AutoPicksAGpuOnlyWhenOneIsPresent) {
  bool gpu_present = false;
  for (const DeviceBackend& backend : device_registry().backends()) {
    if (backend.name == "cpu") continue;
    const Result<int> count = backend.count();
    if (count.ok() && *count > 0) gpu_present = true;
    if (!count.ok()) {
      EXPECT_EQ(count.status().code(), StatusCode::kUnavailable) << count.status().message();
      EXPECT_EQ(make_device(backend.name).status().code(), StatusCode::kUnavailable);
    }
  }
  const std::string backend = value_or_throw(make_device("auto"))->properties().backend;
  EXPECT_EQ(backend == "cpu", !gpu_present) << backend;
}

}  // namespace
}  // namespace eps::device
