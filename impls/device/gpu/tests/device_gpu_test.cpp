// The `cuda` and `hip` devices (docs/devices.md): every kernel of a GPU plugin bit-equal to reference/ (the
// kernel checks the `cpu` device runs, impls/device/tests/kernel_checks.hpp), every entry point of plugin
// ABI version 3 through the execution-model checks the `cpu` devices run (queue_checks.hpp: queues,
// stream memory operations, events, graphs, the copy ledger, host registration, IPC into another process),
// the Device contract over a plugin, and the loader's answers when a plugin or a GPU is missing, a plugin
// does not fit, or a plugin has ABI version 2 only.
//
// ctest runs this binary several times (CMakeLists.txt): once per backend, skipped with the reason where
// that backend has no device; against the host test plugin (host_plugin.cpp) standing in for `cuda`, so the
// loader and the Device over a plugin are exercised on every machine; with EPS_DEVICE_PLUGIN_DIR at a
// stale plugin and at an empty directory, where the loader must refuse with its reason; and at a version-2
// plugin, which must run its synchronous subset and refuse the rest naming its version.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "impls/device/device_registry.hpp"
#include "impls/device/tests/kernel_checks.hpp"
#include "impls/device/tests/queue_checks.hpp"

namespace eps::device {
namespace {

// What the test expects of the plugins here: EPS_TEST_PLUGIN_OUTCOME=missing | stale (set by ctest along
// with EPS_DEVICE_PLUGIN_DIR), empty otherwise.
std::string expected_outcome() {
  const char* outcome = std::getenv("EPS_TEST_PLUGIN_OUTCOME");
  return outcome != nullptr ? outcome : "";
}

std::string runtime_name(const std::string& backend) { return backend == "cuda" ? "CUDA" : "HIP"; }

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class GpuDevice : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Device>> device = make_device(GetParam());
    if (!device.ok()) {
      // docs/errors.md 10.1: an absent GPU is `unavailable`, never another error.
      ASSERT_EQ(device.status().code(), StatusCode::kUnavailable) << device.status().message();
      GTEST_SKIP() << device.status().message();
    }
    device_ = std::move(device).value();
  }
  std::unique_ptr<Device> device_;
};

TEST_P(GpuDevice, CopyRows) { EXPECT_TRUE(testing::check_copy_rows(*device_)); }
TEST_P(GpuDevice, Fp8) { EXPECT_TRUE(testing::check_fp8(*device_)); }
TEST_P(GpuDevice, Combine) { EXPECT_TRUE(testing::check_combine(*device_)); }
TEST_P(GpuDevice, Expert) { EXPECT_TRUE(testing::check_expert(*device_)); }
TEST_P(GpuDevice, Fills) { EXPECT_TRUE(testing::check_fills(*device_)); }
TEST_P(GpuDevice, SumRows) { EXPECT_TRUE(testing::check_sum_rows(*device_)); }
TEST_P(GpuDevice, FifoPush) { EXPECT_TRUE(testing::check_fifo_push(*device_)); }
TEST_P(GpuDevice, AtomicAdd) { EXPECT_TRUE(testing::check_atomic_add(*device_)); }

// Plugin ABI version 3 (device_plugin_v3.h), entry point by entry point.
TEST_P(GpuDevice, OrderedQueue) { EXPECT_TRUE(testing::check_queue_order(*device_)); }
TEST_P(GpuDevice, StreamValues) { EXPECT_TRUE(testing::check_stream_values(*device_)); }
TEST_P(GpuDevice, Events) { EXPECT_TRUE(testing::check_events(*device_)); }
TEST_P(GpuDevice, Graphs) { EXPECT_TRUE(testing::check_graphs(*device_)); }
TEST_P(GpuDevice, CopyLedger) { EXPECT_TRUE(testing::check_copy_ledger(*device_)); }
TEST_P(GpuDevice, HostRegistration) { EXPECT_TRUE(testing::check_host_registration(*device_)); }
TEST_P(GpuDevice, IpcRefusals) { EXPECT_TRUE(testing::check_ipc_refusals(*device_)); }
TEST_P(GpuDevice, IpcAcrossProcesses) {
  EXPECT_TRUE(testing::check_ipc_across_processes(*device_, GetParam()));
}

TEST_P(GpuDevice, PropertiesNameTheDevice) {
  const DeviceProperties& p = device_->properties();
  EXPECT_EQ(p.backend, GetParam());
  EXPECT_EQ(p.ordinal, 0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_FALSE(p.architecture.empty());
  EXPECT_GT(p.memory_bytes, 0u);
  EXPECT_FALSE(p.pci_bus_id.empty());
  EXPECT_TRUE(contains(device_->describe(), GetParam() + ":0 " + p.name)) << device_->describe();
}

// Both memory kinds, copies in every direction (pageable host memory included) and fills.
TEST_P(GpuDevice, CopiesAndFillsMemoryOfBothKinds) {
  constexpr std::size_t kBytes = 3000;
  std::vector<std::uint8_t> source(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) source[i] = static_cast<std::uint8_t>(i * 7 + 1);
  Buffer pinned = value_or_throw(device_->allocate(kBytes, MemoryKind::kHost));
  Buffer on_device = value_or_throw(device_->allocate(kBytes, MemoryKind::kDevice));
  EXPECT_EQ(pinned.kind(), MemoryKind::kHost);
  EXPECT_EQ(on_device.bytes(), kBytes);
  ASSERT_TRUE(device_->copy(pinned.data(), source.data(), kBytes).ok());
  ASSERT_TRUE(device_->copy(on_device.data(), pinned.data(), kBytes).ok());
  ASSERT_TRUE(device_->fill(on_device.as<std::uint8_t>() + 100, 0x5A, 50).ok());
  std::vector<std::uint8_t> back(kBytes);
  ASSERT_TRUE(device_->copy(back.data(), on_device.data(), kBytes).ok());
  std::vector<std::uint8_t> want = source;
  std::fill(want.begin() + 100, want.begin() + 150, std::uint8_t{0x5A});
  EXPECT_EQ(back, want);
  EXPECT_TRUE(device_->copy(back.data(), on_device.data(), 0).ok());
  EXPECT_TRUE(device_->synchronize().ok());
}

TEST_P(GpuDevice, RefusesEmptyAllocationsAndWrongArguments) {
  const Result<Buffer> empty = device_->allocate(0, MemoryKind::kDevice);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(empty.status().message(), "bytes")) << empty.status().message();
  const CopyRowsArgs args;
  const Status wrong = device_->launch(KernelId::kCopyRows, &args, sizeof(args) - 8);
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(wrong.message(), "copy_rows")) << wrong.message();
  const Status no_kernel = device_->launch(KernelId::kCount, &args, sizeof(args));
  EXPECT_EQ(no_kernel.code(), StatusCode::kInvalidArgument) << no_kernel.message();
  // An empty index space launches nothing and succeeds.
  EXPECT_TRUE(device_->run(CopyRowsArgs{}).ok());
  EXPECT_TRUE(device_->synchronize().ok());
}

// Exhausted memory is kEnvironment naming the bytes and the kind (device.hpp), with the runtime's message.
TEST_P(GpuDevice, NamesTheBytesOfAFailedAllocation) {
  constexpr std::size_t kHuge = std::size_t{1} << 52;  // 4 PiB
  const Result<Buffer> huge = device_->allocate(kHuge, MemoryKind::kDevice);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kEnvironment);
  EXPECT_TRUE(contains(huge.status().message(), std::to_string(kHuge) + " bytes of device memory"))
      << huge.status().message();
  // The device stays usable.
  Buffer small = value_or_throw(device_->allocate(64, MemoryKind::kDevice));
  EXPECT_TRUE(device_->fill(small.data(), 0, 64).ok());
}

// docs/devices.md "Device memory at the NIC": GPU memory is registered with its FI_HMEM interface, and the
// export for verbs either gives a dma-buf or says why not, naming the device and the bytes.
TEST_P(GpuDevice, ExportsDeviceMemoryAsDmaBufOrSaysWhyNot) {
  EXPECT_EQ(device_->hmem_interface(), GetParam() == "cuda" ? HmemInterface::kCuda : HmemInterface::kRocr);
  Buffer memory = value_or_throw(device_->allocate(4096, MemoryKind::kDevice));
  const Result<DmaBuf> exported = device_->export_dma_buf(memory.data(), memory.bytes());
  if (exported.ok()) {
    EXPECT_GE(exported->fd, 0);
    EXPECT_EQ(exported->bytes, 4096u);
    close(exported->fd);
  } else {
    EXPECT_EQ(exported.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(exported.status().message().rfind(GetParam() + ":0: export 4096 bytes as a dma-buf: ", 0), 0u)
        << exported.status().message();
  }
  EXPECT_EQ(device_->export_dma_buf(memory.data(), 0).status().code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backend, GpuDevice, ::testing::Values("cuda", "hip"),
                         [](const auto& info) { return info.param; });

// The importing side of IpcAcrossProcesses (this binary started again); skipped in a plain run.
TEST(IpcChild, ImportsAndWritesBack) {
  bool is_child = false;
  const ::testing::AssertionResult result = testing::ipc_child(&is_child);
  if (!is_child) GTEST_SKIP() << "runs as the child of IpcAcrossProcesses only";
  EXPECT_TRUE(result);
}

// A version-2 plugin (the synchronous subset, exported as eps_device_plugin_v1 before the headers were
// split) loads: its kernels and synchronous copies work and are counted in the ledger; queues, events,
// stream memory operations, IPC, host registration and graphs are unavailable, naming the version.
TEST(GpuPluginLoader, TakesAVersionTwoPluginAsTheSynchronousSubset) {
  if (expected_outcome() != "v2") GTEST_SKIP() << "needs EPS_TEST_PLUGIN_OUTCOME=v2";
  std::unique_ptr<Device> device = value_or_throw(make_device("cuda"));
  EXPECT_TRUE(testing::check_copy_rows(*device));
  EXPECT_TRUE(testing::check_fills(*device));
  device->reset_copy_ledger();
  std::vector<std::uint8_t> host(64, 1);
  Buffer memory = value_or_throw(device->allocate(64, MemoryKind::kDevice));
  ASSERT_TRUE(device->copy(memory.data(), host.data(), 64).ok());
  EXPECT_EQ(device->copy_ledger(), (CopyLedger{1, 64, 0, 0}));
  const std::string version = "has device plugin ABI version 2 (symbol eps_device_plugin_v1)";
  const std::vector<Status> refusals = {
      device->create_queue().status(),
      device->create_event().status(),
      device->queue().write_value(memory.data(), 1, ValueWidth::k64),
      device->queue().wait_value(memory.data(), 1, WaitCondition::kEqual, ValueWidth::k64, 1),
      device->export_memory(memory.data(), 64).status(),
      device->register_host_memory(host.data(), 64).status(),
      device->queue().begin_capture(),
  };
  for (const Status& refused : refusals) {
    EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.message();
    EXPECT_TRUE(contains(refused.message(), version)) << refused.message();
  }
}

// Without a device, a backend is unavailable with the loader's or the runtime's reason; a plugin this build
// made must load (its dependencies resolve without a GPU), so its reason comes from the runtime.
TEST(GpuPluginLoader, CountsDevicesOrSaysWhyNot) {
  if (!expected_outcome().empty()) GTEST_SKIP() << "EPS_TEST_PLUGIN_OUTCOME=" << expected_outcome();
  std::error_code error;
  const std::filesystem::path here = std::filesystem::read_symlink("/proc/self/exe", error).parent_path();
  for (const std::string backend : {"cuda", "hip"}) {
    const DeviceBackend* entry = device_registry().find(backend);
    ASSERT_NE(entry, nullptr) << backend;
    const Result<int> count = entry->count();
    if (count.ok()) {
      EXPECT_GT(*count, 0) << backend;
      continue;
    }
    const std::string& message = count.status().message();
    EXPECT_EQ(count.status().code(), StatusCode::kUnavailable) << message;
    EXPECT_EQ(message.rfind(backend + ": ", 0), 0u) << message;
    const bool built_here = std::filesystem::exists(here / ("libeps_device_" + backend + ".so"));
    if (built_here && std::getenv("EPS_DEVICE_PLUGIN_DIR") == nullptr) {
      EXPECT_TRUE(contains(message, "no " + runtime_name(backend) + " device (")) << message;
    } else {
      EXPECT_TRUE(contains(message, "libeps_device_" + backend + ".so cannot be loaded: ") ||
                  contains(message, "no " + runtime_name(backend) + " device ("))
          << message;
    }
  }
}

TEST(GpuPluginLoader, NamesThePluginItCannotFind) {
  if (expected_outcome() != "missing") GTEST_SKIP() << "needs EPS_TEST_PLUGIN_OUTCOME=missing";
  const Result<std::unique_ptr<Device>> device = make_device("cuda");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(contains(device.status().message(), "cuda: libeps_device_cuda.so cannot be loaded: "))
      << device.status().message();
  EXPECT_TRUE(contains(device.status().message(), std::getenv("EPS_DEVICE_PLUGIN_DIR")))
      << device.status().message();
}

TEST(GpuPluginLoader, RefusesAPluginBuiltForOtherKernels) {
  if (expected_outcome() != "stale") GTEST_SKIP() << "needs EPS_TEST_PLUGIN_OUTCOME=stale";
  const Result<int> count = device_registry().find("cuda")->count();
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(contains(count.status().message(), "kernels, this epsuite has " +
                                                     std::to_string(static_cast<int>(KernelId::kCount)) +
                                                     " (rebuild the plugin)"))
      << count.status().message();
}

}  // namespace
}  // namespace eps::device
