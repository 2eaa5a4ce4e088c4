// The `cpu` and `cpu-isolated` devices (docs/devices.md 12, 12.1-12.7): every kernel body bit-equal to
// reference/ on every instruction set this CPU has, on host memory and on isolated memory
// (kernel_checks.hpp); the execution model (queue_checks.hpp); their memory and launch contract; the
// isolation itself (a host read of isolated device memory faults); and the registry's --device names.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include <fmt/format.h>

#include "impls/device/cpu/cpu_device.hpp"
#include "impls/device/device_registry.hpp"
#include "impls/device/tests/kernel_checks.hpp"
#include "impls/device/tests/queue_checks.hpp"

namespace eps::device {
namespace {

struct KernelCase {
  CpuIsa isa;
  bool isolated;
};

class CpuKernels : public ::testing::TestWithParam<KernelCase> {
 protected:
  void SetUp() override {
    CpuDeviceOptions options;
    options.isa = GetParam().isa;
    options.isolated = GetParam().isolated;
    options.threads = 3;  // several threads even on 2 cores: the index split must not change a bit
    device_ = value_or_throw(make_cpu_device(options));
  }
  std::unique_ptr<Device> device_;
};

std::vector<KernelCase> kernel_cases() {
  std::vector<KernelCase> out;
  for (CpuIsa isa : available_cpu_isas()) {
    out.push_back({isa, false});
    out.push_back({isa, true});
  }
  return out;
}

TEST_P(CpuKernels, CopyRows) { EXPECT_TRUE(testing::check_copy_rows(*device_)); }
TEST_P(CpuKernels, Fp8) { EXPECT_TRUE(testing::check_fp8(*device_)); }
TEST_P(CpuKernels, Combine) { EXPECT_TRUE(testing::check_combine(*device_)); }
TEST_P(CpuKernels, Expert) { EXPECT_TRUE(testing::check_expert(*device_)); }
TEST_P(CpuKernels, Fills) { EXPECT_TRUE(testing::check_fills(*device_)); }
TEST_P(CpuKernels, SumRows) { EXPECT_TRUE(testing::check_sum_rows(*device_)); }
TEST_P(CpuKernels, FifoPush) { EXPECT_TRUE(testing::check_fifo_push(*device_)); }
TEST_P(CpuKernels, AtomicAdd) { EXPECT_TRUE(testing::check_atomic_add(*device_)); }

TEST_P(CpuKernels, RunsTheRequestedInstructionSet) {
  EXPECT_NE(device_->properties().architecture.find(cpu_isa_name(GetParam().isa)), std::string::npos)
      << device_->properties().architecture;
  EXPECT_EQ(device_->properties().backend, GetParam().isolated ? "cpu-isolated" : "cpu");
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuKernels, ::testing::ValuesIn(kernel_cases()), [](const auto& info) {
  return std::string(cpu_isa_name(info.param.isa)) + (info.param.isolated ? "_isolated" : "");
});

// The execution model (docs/devices.md 12.1-12.7) on both host backends, by their --device names.
class CpuQueues : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { device_ = value_or_throw(make_device(GetParam())); }
  std::unique_ptr<Device> device_;
};

TEST_P(CpuQueues, OrderedQueue) { EXPECT_TRUE(testing::check_queue_order(*device_)); }
TEST_P(CpuQueues, StreamValues) { EXPECT_TRUE(testing::check_stream_values(*device_)); }
TEST_P(CpuQueues, Events) { EXPECT_TRUE(testing::check_events(*device_)); }
TEST_P(CpuQueues, Graphs) { EXPECT_TRUE(testing::check_graphs(*device_)); }
TEST_P(CpuQueues, CopyLedger) { EXPECT_TRUE(testing::check_copy_ledger(*device_)); }
TEST_P(CpuQueues, HostRegistration) { EXPECT_TRUE(testing::check_host_registration(*device_)); }
TEST_P(CpuQueues, IpcRefusals) { EXPECT_TRUE(testing::check_ipc_refusals(*device_)); }
TEST_P(CpuQueues, IpcAcrossProcesses) {
  EXPECT_TRUE(testing::check_ipc_across_processes(*device_, GetParam()));
}

// The importing side of IpcAcrossProcesses (this binary started again); skipped in a plain run.
TEST(IpcChild, ImportsAndWritesBack) {
  bool is_child = false;
  const ::testing::AssertionResult result = testing::ipc_child(&is_child);
  if (!is_child) GTEST_SKIP() << "runs as the child of IpcAcrossProcesses only";
  EXPECT_TRUE(result);
}

// A wait_value that is never satisfied gives up after its timeout (docs/devices.md 12.2): the queue fails
// with a message naming the address, the condition and the value last seen, the operations behind it are
// dropped (an event recorded behind it reports the failure), and every later call returns the failure.
TEST_P(CpuQueues, WaitValueGivesUpNamingTheAddressAndValue) {
  Buffer word = value_or_throw(device_->allocate(8, MemoryKind::kDevice));
  Buffer flag = value_or_throw(device_->allocate(8, MemoryKind::kDevice));
  ASSERT_TRUE(device_->fill(word.data(), 0, 8).ok());
  ASSERT_TRUE(device_->fill(flag.data(), 0, 8).ok());
  std::unique_ptr<Queue> queue = value_or_throw(device_->create_queue());
  std::unique_ptr<Event> event = value_or_throw(device_->create_event());
  ASSERT_TRUE(queue->wait_value(word.data(), 3, WaitCondition::kGreaterEqual, ValueWidth::k64, 0.2).ok());
  ASSERT_TRUE(queue->write_value(flag.data(), 1, ValueWidth::k64).ok());
  ASSERT_TRUE(queue->record(*event).ok());
  const Status failed = queue->synchronize(Deadline(30));
  EXPECT_EQ(failed.code(), StatusCode::kEnvironment);
  const std::string address = fmt::format("{}", word.data());
  for (const std::string& part : {std::string("wait_value gave up after"), "64-bit value at " + address,
                                  std::string("(device memory) never became >= 3; last seen 0")}) {
    EXPECT_NE(failed.message().find(part), std::string::npos) << failed.message();
  }
  EXPECT_EQ(event->done().status().message(), failed.message());
  EXPECT_EQ(queue->copy(flag.data(), word.data(), 8).message(), failed.message());
  std::uint64_t flag_value = 9;
  ASSERT_TRUE(device_->copy(&flag_value, flag.data(), 8).ok());
  EXPECT_EQ(flag_value, 0u) << "an operation behind the failed wait ran";
}

// The fast path (cpu_queue.hpp): on an idle queue an operation runs before the enqueue returns, so host
// code of the `cpu` device sees a kernel's output without a synchronize, as before queues were explicit.
TEST(CpuQueue, IdleQueueRunsOperationsAtOnce) {
  std::unique_ptr<Device> device = value_or_throw(make_cpu_device());
  Buffer src = value_or_throw(device->allocate(64, MemoryKind::kDevice));
  Buffer dst = value_or_throw(device->allocate(64, MemoryKind::kDevice));
  std::memset(src.data(), 0x5A, 64);
  std::memset(dst.data(), 0, 64);
  ASSERT_TRUE(
      device->run(CopyRowsArgs{dst.as<std::byte>(), src.as<std::byte>(), 1, 64, 64, 64, nullptr, nullptr})
          .ok());
  EXPECT_EQ(dst.as<std::uint8_t>()[63], 0x5A);
  ASSERT_TRUE(device->queue().write_value(dst.data(), 77, ValueWidth::k64).ok());
  EXPECT_EQ(*dst.as<std::uint64_t>(), 77u);
}

INSTANTIATE_TEST_SUITE_P(Backend, CpuQueues, ::testing::Values("cpu", "cpu-isolated"), [](const auto& info) {
  std::string name = info.param;
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
});

// docs/devices.md 12.5: the host may not touch cpu-isolated device memory. A host load of it faults
// (SIGSEGV), while device operations on the same memory work, and its host memory (kHost) stays host memory.
TEST(CpuIsolated, HostAccessToDeviceMemoryFaults) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  std::unique_ptr<Device> device = value_or_throw(make_device("cpu-isolated"));
  EXPECT_FALSE(device->host_accessible());
  EXPECT_EQ(device->properties().backend, "cpu-isolated");
  Buffer memory = value_or_throw(device->allocate(4096, MemoryKind::kDevice));
  const std::uint64_t value = 0x0123456789ABCDEFull;
  ASSERT_TRUE(device->copy(memory.data(), &value, sizeof value).ok());
  std::uint64_t back = 0;
  ASSERT_TRUE(device->copy(&back, memory.data(), sizeof back).ok());
  EXPECT_EQ(back, value);
  EXPECT_DEATH(
      {
        const std::uint64_t seen = std::atomic_ref<std::uint64_t>(*memory.as<std::uint64_t>()).load();
        std::fprintf(stderr, "read %llu\n", static_cast<unsigned long long>(seen));
      },
      "");
  EXPECT_EXIT({ *memory.as<std::uint8_t>() = 1; }, ::testing::KilledBySignal(SIGSEGV), "");
  Buffer host = value_or_throw(device->allocate(64, MemoryKind::kHost));
  std::memset(host.data(), 0x42, 64);  // host memory: no fault
  ASSERT_TRUE(device->copy(memory.data(), host.data(), 64).ok());
  std::uint8_t first = 0;
  ASSERT_TRUE(device->copy(&first, memory.data(), 1).ok());
  EXPECT_EQ(first, 0x42);
}

// A kernel argument pointing into isolated memory is translated; a range that leaves device memory is
// refused at enqueue, naming the field.
TEST(CpuIsolated, RefusesRangesThatLeaveDeviceMemory) {
  std::unique_ptr<Device> device = value_or_throw(make_device("cpu-isolated"));
  Buffer memory = value_or_throw(device->allocate(4096, MemoryKind::kDevice));
  const std::size_t capacity = device->properties().memory_bytes;
  std::vector<std::uint8_t> host(64);
  const Status past_end =
      device->copy(host.data(), static_cast<std::byte*>(memory.data()) + capacity - 8, 64);
  EXPECT_EQ(past_end.code(), StatusCode::kInvalidArgument) << past_end.message();
  EXPECT_NE(past_end.message().find("copy.src"), std::string::npos) << past_end.message();
}

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
  for (const char* name : {"auto", "cpu", "cpu-isolated", "cuda", "hip"})
    EXPECT_NE(std::find(choices.begin(), choices.end(), name), choices.end()) << name;
  const Result<std::unique_ptr<Device>> unknown = make_device("tpu");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("--device: unknown device 'tpu'; choices: auto, cpu"),
            std::string::npos)
      << unknown.status().message();
  for (const char* bad : {"cpu:1", "cpu-isolated:0", "cuda:x", "cuda:-1", "cuda:"}) {
    EXPECT_EQ(make_device(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(value_or_throw(make_device("cpu"))->properties().backend, "cpu");
  std::unique_ptr<Device> isolated = value_or_throw(make_device("cpu-isolated"));
  EXPECT_EQ(isolated->properties().backend, "cpu-isolated");
  EXPECT_FALSE(isolated->host_accessible());
}

// Without a GPU here, `auto` falls back to the cpu device; with one it picks the GPU.
TEST(DeviceRegistry, AutoPicksAGpuOnlyWhenOneIsPresent) {
  bool gpu_present = false;
  for (const DeviceBackend& backend : device_registry().backends()) {
    if (backend.host) continue;
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
