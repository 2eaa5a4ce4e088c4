#include "impls/device/tests/queue_checks.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "impls/device/device_registry.hpp"
#include "impls/device/tests/kernel_checks.hpp"
#include "reference/data/values.hpp"

extern char** environ;

namespace eps::device::testing {
namespace {

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

constexpr double kWaitSeconds = 60;

// Byte i of test pattern `seed`: a fixed function of the position, written here.
std::vector<std::uint8_t> pattern(std::size_t bytes, int seed) {
  std::vector<std::uint8_t> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    out[i] = static_cast<std::uint8_t>((i * (2 * seed + 129) + 7 * seed) >> 1);
  return out;
}

// Status -> assertion, with what was being done.
#define EPS_CHECK_OK(expr)                                                                                  \
  do {                                                                                                      \
    const ::eps::Status eps_check_status_ = (expr);                                                         \
    if (!eps_check_status_.ok()) return AssertionFailure() << #expr << ": " << eps_check_status_.message(); \
  } while (0)

template <typename T>
AssertionResult equal(std::string_view what, const std::vector<T>& expected, const std::vector<T>& actual) {
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (i >= actual.size() || expected[i] != actual[i]) {
      return AssertionFailure() << what << ": element " << i << " expected " << +expected[i] << ", got "
                                << (i < actual.size() ? +actual[i] : -1);
    }
  }
  return AssertionSuccess();
}

#define EPS_CHECK_EQUAL(what, expected, actual)                       \
  do {                                                                \
    AssertionResult eps_equal_ = equal((what), (expected), (actual)); \
    if (!eps_equal_) return eps_equal_;                               \
  } while (0)

template <typename T>
T read_one(Device& device, const void* address) {
  T value{};
  throw_if_error(device.copy(&value, address, sizeof value));
  return value;
}

// A 64-bit word of device memory, zero.
Buffer word(Device& device) { return upload(device, std::vector<std::uint64_t>{0}); }

// Whether `queue` is still busy a little later (it should be: something holds it).
AssertionResult still_held(Queue& queue, std::string_view what) {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const Result<bool> idle = queue.idle();
  if (!idle.ok()) return AssertionFailure() << what << ": " << idle.status().message();
  if (*idle) return AssertionFailure() << what << ": the queue went idle although a wait holds it";
  return AssertionSuccess();
}

AssertionResult refused(const Status& status, std::string_view field) {
  if (status.code() != StatusCode::kInvalidArgument || status.message().find(field) == std::string::npos) {
    return AssertionFailure() << "expected kInvalidArgument naming " << field << ", got " << status.message();
  }
  return AssertionSuccess();
}

#define EPS_CHECK_REFUSED(expr, field)                        \
  do {                                                        \
    AssertionResult eps_refused_ = refused((expr), (field));  \
    if (!eps_refused_) return eps_refused_ << " (" #expr ")"; \
  } while (0)

std::string hex(const void* data, std::size_t bytes) {
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i)
    out += fmt::format("{:02x}", static_cast<const std::uint8_t*>(data)[i]);
  return out;
}

bool unhex(const std::string& text, void* data, std::size_t bytes) {
  if (text.size() != 2 * bytes) return false;
  for (std::size_t i = 0; i < bytes; ++i) {
    static_cast<std::uint8_t*>(data)[i] =
        static_cast<std::uint8_t>(std::stoul(text.substr(2 * i, 2), nullptr, 16));
  }
  return true;
}

constexpr std::size_t kIpcBytes = 8192;

}  // namespace

AssertionResult check_queue_order(Device& device) {
  constexpr std::size_t kBytes = 4096;
  const std::vector<std::uint8_t> source = pattern(kBytes, 1);
  const std::vector<std::uint8_t> zeros(kBytes, 0);
  Buffer src = upload(device, source);
  Buffer dst = upload(device, zeros);
  Buffer filled = upload(device, std::vector<std::uint8_t>(256, 0));
  Buffer rows = upload(device, std::vector<std::uint8_t>(512, 0));
  Buffer gate = word(device);
  Buffer flag = word(device);
  std::unique_ptr<Queue> queue = value_or_throw(device.create_queue());
  EPS_CHECK_OK(
      queue->wait_value(gate.data(), 1, WaitCondition::kGreaterEqual, ValueWidth::k64, kWaitSeconds));
  EPS_CHECK_OK(queue->copy(dst.data(), src.data(), kBytes));
  EPS_CHECK_OK(queue->fill(filled.data(), 0x3C, 256));
  EPS_CHECK_OK(
      queue->run(CopyRowsArgs{rows.as<std::byte>(), src.as<std::byte>(), 8, 64, 64, 64, nullptr, nullptr}));
  EPS_CHECK_OK(queue->write_value(flag.data(), 7, ValueWidth::k64));
  if (AssertionResult held = still_held(*queue, "before the gate opens"); !held) return held;
  EPS_CHECK_EQUAL("the copy behind the wait ran early", zeros, download<std::uint8_t>(device, dst, kBytes));
  EPS_CHECK_EQUAL("the fill behind the wait ran early", std::vector<std::uint8_t>(256, 0),
                  download<std::uint8_t>(device, filled, 256));
  EPS_CHECK_EQUAL("the kernel behind the wait ran early", std::vector<std::uint8_t>(512, 0),
                  download<std::uint8_t>(device, rows, 512));
  if (read_one<std::uint64_t>(device, flag.data()) != 0)
    return AssertionFailure() << "the write_value ran early";
  EPS_CHECK_OK(device.queue().write_value(gate.data(), 1, ValueWidth::k64));
  EPS_CHECK_OK(device.synchronize());
  EPS_CHECK_OK(queue->synchronize(Deadline(kWaitSeconds)));
  EPS_CHECK_EQUAL("the copy after the wait", source, download<std::uint8_t>(device, dst, kBytes));
  EPS_CHECK_EQUAL("the fill after the wait", std::vector<std::uint8_t>(256, 0x3C),
                  download<std::uint8_t>(device, filled, 256));
  EPS_CHECK_EQUAL("the kernel after the wait",
                  std::vector<std::uint8_t>(source.begin(), source.begin() + 512),
                  download<std::uint8_t>(device, rows, 512));
  if (const auto seen = read_one<std::uint64_t>(device, flag.data()); seen != 7) {
    return AssertionFailure() << "write_value after the wait: flag " << seen << ", expected 7";
  }
  const Result<bool> idle = queue->idle();
  if (!idle.ok() || !*idle) return AssertionFailure() << "the queue is not idle after synchronize";
  return AssertionSuccess();
}

AssertionResult check_stream_values(Device& device) {
  Buffer words32 = upload(device, std::vector<std::uint32_t>{0, 0});
  Buffer word64 = word(device);
  Buffer flag = word(device);
  auto* second32 = words32.as<std::uint32_t>() + 1;
  std::unique_ptr<Queue> queue = value_or_throw(device.create_queue());
  EPS_CHECK_OK(queue->write_value(second32, 0xDEADBEEFu, ValueWidth::k32));
  EPS_CHECK_OK(queue->write_value(word64.data(), (std::uint64_t{1} << 40) | 5, ValueWidth::k64));
  EPS_CHECK_OK(queue->synchronize(Deadline(kWaitSeconds)));
  EPS_CHECK_EQUAL("32-bit write_value (and its neighbour untouched)",
                  (std::vector<std::uint32_t>{0, 0xDEADBEEFu}), download<std::uint32_t>(device, words32, 2));
  if (read_one<std::uint64_t>(device, word64.data()) != ((std::uint64_t{1} << 40) | 5)) {
    return AssertionFailure() << "64-bit write_value: wrong value";
  }
  // Waits already satisfied pass.
  EPS_CHECK_OK(queue->wait_value(word64.data(), 5, WaitCondition::kGreaterEqual, ValueWidth::k64, 1));
  EPS_CHECK_OK(queue->wait_value(second32, 0xDEADBEEFu, WaitCondition::kEqual, ValueWidth::k32, 1));
  EPS_CHECK_OK(queue->write_value(flag.data(), 1, ValueWidth::k64));
  EPS_CHECK_OK(queue->synchronize(Deadline(kWaitSeconds)));
  if (read_one<std::uint64_t>(device, flag.data()) != 1)
    return AssertionFailure() << "satisfied waits held the queue";
  // == holds while the value is only greater-or-equal elsewhere: 2 does not release a wait for == 3.
  EPS_CHECK_OK(queue->wait_value(words32.data(), 3, WaitCondition::kEqual, ValueWidth::k32, kWaitSeconds));
  EPS_CHECK_OK(queue->write_value(flag.data(), 2, ValueWidth::k64));
  EPS_CHECK_OK(device.queue().write_value(words32.data(), 2, ValueWidth::k32));
  EPS_CHECK_OK(device.synchronize());
  if (AssertionResult held = still_held(*queue, "a wait for == 3 at 2"); !held) return held;
  EPS_CHECK_OK(device.queue().write_value(words32.data(), 3, ValueWidth::k32));
  EPS_CHECK_OK(device.synchronize());
  EPS_CHECK_OK(queue->synchronize(Deadline(kWaitSeconds)));
  if (read_one<std::uint64_t>(device, flag.data()) != 2)
    return AssertionFailure() << "the == wait did not release";
  // The host's deadline bounds a wait that is never satisfied (on a GPU the wait itself cannot give up).
  EPS_CHECK_OK(queue->wait_value(word64.data(), std::uint64_t{1} << 41, WaitCondition::kGreaterEqual,
                                 ValueWidth::k64, kWaitSeconds));
  const Status timed_out = queue->synchronize(Deadline(0.2));
  if (timed_out.code() != StatusCode::kEnvironment ||
      timed_out.message().find("timed out") == std::string::npos) {
    return AssertionFailure() << "synchronize behind an unsatisfied wait: " << timed_out.message();
  }
  EPS_CHECK_OK(device.queue().write_value(word64.data(), std::uint64_t{1} << 41, ValueWidth::k64));
  EPS_CHECK_OK(device.synchronize());
  EPS_CHECK_OK(queue->synchronize(Deadline(kWaitSeconds)));
  // Refusals, on the queue and without enqueueing anything.
  auto* misaligned = static_cast<std::byte*>(word64.data()) + 4;
  EPS_CHECK_REFUSED(queue->write_value(misaligned, 1, ValueWidth::k64), "write_value.address");
  EPS_CHECK_REFUSED(queue->write_value(nullptr, 1, ValueWidth::k32), "write_value.address");
  EPS_CHECK_REFUSED(queue->write_value(words32.data(), std::uint64_t{1} << 32, ValueWidth::k32),
                    "write_value.value");
  EPS_CHECK_REFUSED(queue->wait_value(misaligned, 1, WaitCondition::kEqual, ValueWidth::k64, 1),
                    "wait_value.address");
  EPS_CHECK_REFUSED(
      queue->wait_value(words32.data(), std::uint64_t{1} << 32, WaitCondition::kEqual, ValueWidth::k32, 1),
      "wait_value.value");
  EPS_CHECK_REFUSED(queue->wait_value(word64.data(), 1, WaitCondition::kEqual, ValueWidth::k64, 0),
                    "wait_value.timeout_seconds");
  return AssertionSuccess();
}

AssertionResult check_events(Device& device) {
  Buffer gate = word(device);
  Buffer flag = word(device);
  std::unique_ptr<Queue> held = value_or_throw(device.create_queue());
  std::unique_ptr<Queue> follower = value_or_throw(device.create_queue());
  std::unique_ptr<Event> event = value_or_throw(device.create_event());
  const Result<bool> fresh = event->done();
  if (!fresh.ok() || !*fresh) return AssertionFailure() << "an event never recorded is not done";
  EPS_CHECK_OK(held->wait_value(gate.data(), 1, WaitCondition::kGreaterEqual, ValueWidth::k64, kWaitSeconds));
  EPS_CHECK_OK(held->record(*event));
  EPS_CHECK_OK(follower->wait(*event));
  EPS_CHECK_OK(follower->write_value(flag.data(), 9, ValueWidth::k64));
  if (AssertionResult still = still_held(*follower, "a queue waiting for an event behind a held wait");
      !still) {
    return still;
  }
  const Result<bool> early = event->done();
  if (!early.ok() || *early)
    return AssertionFailure() << "the event is done although the work before it is held";
  if (read_one<std::uint64_t>(device, flag.data()) != 0) {
    return AssertionFailure() << "the follower ran before the event it waits for";
  }
  EPS_CHECK_REFUSED(device.elapsed_seconds(*event, *event).status(), "elapsed_seconds");
  EPS_CHECK_OK(device.queue().write_value(gate.data(), 1, ValueWidth::k64));
  EPS_CHECK_OK(device.synchronize());
  EPS_CHECK_OK(event->wait(Deadline(kWaitSeconds)));
  EPS_CHECK_OK(follower->synchronize(Deadline(kWaitSeconds)));
  if (read_one<std::uint64_t>(device, flag.data()) != 9)
    return AssertionFailure() << "the follower did not run";
  // Timing around a kernel.
  std::unique_ptr<Event> start = value_or_throw(device.create_event());
  std::unique_ptr<Event> end = value_or_throw(device.create_event());
  Buffer payload = upload(device, std::vector<bf16>(64 * 128));
  EPS_CHECK_OK(held->record(*start));
  EPS_CHECK_OK(held->run(FillPayloadArgs{payload.as<bf16>(), 64, 128, 5, 0, 0}));
  EPS_CHECK_OK(held->record(*end));
  EPS_CHECK_OK(end->wait(Deadline(kWaitSeconds)));
  const Result<double> seconds = device.elapsed_seconds(*start, *end);
  if (!seconds.ok()) return AssertionFailure() << "elapsed_seconds: " << seconds.status().message();
  if (!(*seconds >= 0 && *seconds < kWaitSeconds))
    return AssertionFailure() << "elapsed " << *seconds << " s";
  return AssertionSuccess();
}

AssertionResult check_graphs(Device& device) {
  constexpr std::size_t kBytes = 2048;
  constexpr std::int64_t kRows = 3;
  constexpr std::int32_t kHidden = 64;
  Buffer src = upload(device, pattern(kBytes, 9));  // at capture: what a copy run then would show
  Buffer dst = upload(device, std::vector<std::uint8_t>(kBytes, 0));
  Buffer staged = upload(device, std::vector<std::uint8_t>(kBytes, 0));
  Buffer filled = upload(device, std::vector<std::uint8_t>(64, 0));
  Buffer payload = upload(device, std::vector<bf16>(kRows * kHidden));
  Buffer flag = word(device);
  Buffer pinned = value_or_throw(device.allocate(kBytes, MemoryKind::kHost));
  std::memset(pinned.data(), 0x77, kBytes);
  std::unique_ptr<Queue> queue = value_or_throw(device.create_queue());
  std::unique_ptr<Event> event = value_or_throw(device.create_event());
  EPS_CHECK_OK(queue->begin_capture());
  EPS_CHECK_OK(queue->copy(dst.data(), src.data(), kBytes));
  EPS_CHECK_OK(queue->copy(staged.data(), pinned.data(), kBytes));
  EPS_CHECK_OK(queue->fill(filled.data(), 0x11, 64));
  EPS_CHECK_OK(queue->run(FillPayloadArgs{payload.as<bf16>(), kRows, kHidden, 77, 3, 10}));
  EPS_CHECK_OK(queue->write_value(flag.data(), 5, ValueWidth::k64));
  EPS_CHECK_REFUSED(queue->synchronize(Deadline(1)), "synchronize");
  EPS_CHECK_REFUSED(queue->record(*event), "record");
  EPS_CHECK_REFUSED(queue->begin_capture(), "begin_capture");
  std::unique_ptr<Graph> graph = value_or_throw(queue->end_capture());
  EPS_CHECK_REFUSED(queue->end_capture().status(), "end_capture");
  const CopyLedger one_upload{1, kBytes, 0, 0};
  if (!(graph->copies() == one_upload)) {
    return AssertionFailure() << "the graph counts " << graph->copies().host_to_device_copies
                              << " host->device copies of " << graph->copies().host_to_device_bytes
                              << " bytes, expected 1 of " << kBytes;
  }
  EPS_CHECK_EQUAL("a captured copy ran at capture", std::vector<std::uint8_t>(kBytes, 0),
                  download<std::uint8_t>(device, dst, kBytes));
  EPS_CHECK_EQUAL("a captured upload ran at capture", std::vector<std::uint8_t>(kBytes, 0),
                  download<std::uint8_t>(device, staged, kBytes));
  if (read_one<std::uint64_t>(device, flag.data()) != 0)
    return AssertionFailure() << "a captured write_value ran";
  std::vector<bf16> expected_payload(kRows * kHidden);
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (std::int32_t c = 0; c < kHidden; ++c) {
      expected_payload[static_cast<std::size_t>(r * kHidden + c)] =
          data::payload_value(77, 3, static_cast<std::uint32_t>(10 + r), static_cast<std::uint32_t>(c));
    }
  }
  for (int replay = 0; replay < 2; ++replay) {
    const std::vector<std::uint8_t> device_input = pattern(kBytes, 10 + replay);
    const std::vector<std::uint8_t> host_input = pattern(kBytes, 20 + replay);
    EPS_CHECK_OK(device.copy(src.data(), device_input.data(), kBytes));
    std::memcpy(pinned.data(), host_input.data(), kBytes);
    EPS_CHECK_OK(device.fill(filled.data(), 0, 64));
    EPS_CHECK_OK(device.queue().write_value(flag.data(), 0, ValueWidth::k64));
    EPS_CHECK_OK(device.synchronize());
    const CopyLedger before = device.copy_ledger();
    EPS_CHECK_OK(queue->replay(*graph));
    EPS_CHECK_OK(queue->synchronize(Deadline(kWaitSeconds)));
    const CopyLedger after = device.copy_ledger();
    if (after.host_to_device_copies - before.host_to_device_copies != 1 ||
        after.host_to_device_bytes - before.host_to_device_bytes != kBytes ||
        after.device_to_host_copies != before.device_to_host_copies) {
      return AssertionFailure() << "replay " << replay << " did not count its one host->device copy";
    }
    EPS_CHECK_EQUAL(fmt::format("replay {}: device copy", replay), device_input,
                    download<std::uint8_t>(device, dst, kBytes));
    EPS_CHECK_EQUAL(fmt::format("replay {}: host copy", replay), host_input,
                    download<std::uint8_t>(device, staged, kBytes));
    EPS_CHECK_EQUAL(fmt::format("replay {}: fill", replay), std::vector<std::uint8_t>(64, 0x11),
                    download<std::uint8_t>(device, filled, 64));
    const std::vector<bf16> got = download<bf16>(device, payload, expected_payload.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i].bits != expected_payload[i].bits) {
        return AssertionFailure() << "replay " << replay << ": payload element " << i << " differs";
      }
    }
    if (read_one<std::uint64_t>(device, flag.data()) != 5)
      return AssertionFailure() << "replay " << replay << ": flag";
  }
  return AssertionSuccess();
}

AssertionResult check_copy_ledger(Device& device) {
  device.reset_copy_ledger();
  if (!(device.copy_ledger() == CopyLedger{})) return AssertionFailure() << "reset_copy_ledger left counts";
  const std::vector<std::uint8_t> host = pattern(256, 3);
  std::vector<std::uint8_t> back(256);
  Buffer a = value_or_throw(device.allocate(256, MemoryKind::kDevice));
  Buffer b = value_or_throw(device.allocate(256, MemoryKind::kDevice));
  Buffer pinned = value_or_throw(device.allocate(64, MemoryKind::kHost));
  EPS_CHECK_OK(device.copy(a.data(), host.data(), 100));      // host -> device
  EPS_CHECK_OK(device.copy(back.data(), a.data(), 50));       // device -> host
  EPS_CHECK_OK(device.copy(b.data(), a.data(), 30));          // device -> device: not counted
  EPS_CHECK_OK(device.copy(back.data(), host.data(), 20));    // host -> host: not counted
  EPS_CHECK_OK(device.copy(pinned.data(), host.data(), 10));  // pageable -> pinned host: not counted
  EPS_CHECK_OK(device.copy(a.data(), pinned.data(), 40));     // pinned host -> device
  EPS_CHECK_OK(device.fill(a.data(), 0, 256));                // fills are no copies
  std::unique_ptr<Queue> queue = value_or_throw(device.create_queue());
  EPS_CHECK_OK(queue->copy(b.data(), host.data(), 8));  // enqueued host -> device
  EPS_CHECK_OK(queue->synchronize(Deadline(kWaitSeconds)));
  const CopyLedger expected{3, 148, 1, 50};
  const CopyLedger got = device.copy_ledger();
  if (!(got == expected)) {
    return AssertionFailure() << fmt::format(
               "ledger h2d {} copies / {} bytes, d2h {} / {}; expected h2d 3 / 148, d2h 1 / 50",
               got.host_to_device_copies, got.host_to_device_bytes, got.device_to_host_copies,
               got.device_to_host_bytes);
  }
  device.reset_copy_ledger();
  if (!(device.copy_ledger() == CopyLedger{})) return AssertionFailure() << "reset_copy_ledger left counts";
  return AssertionSuccess();
}

AssertionResult check_host_registration(Device& device) {
  constexpr std::size_t kBytes = 4096;
  std::unique_ptr<std::uint64_t, decltype(&std::free)> host(
      static_cast<std::uint64_t*>(std::aligned_alloc(kBytes, kBytes)), &std::free);
  std::memset(host.get(), 0, kBytes);
  std::unique_ptr<MappedMemory> registered = value_or_throw(device.register_host_memory(host.get(), kBytes));
  auto* words = static_cast<std::uint64_t*>(registered->data());
  Buffer flag = word(device);
  std::unique_ptr<Queue> queue = value_or_throw(device.create_queue());
  EPS_CHECK_OK(queue->write_value(words + 1, 0x1234, ValueWidth::k64));
  EPS_CHECK_OK(queue->synchronize(Deadline(kWaitSeconds)));
  if (const auto seen = std::atomic_ref<std::uint64_t>(host.get()[1]).load(std::memory_order_acquire);
      seen != 0x1234) {
    return AssertionFailure() << "write_value to registered host memory: the host reads " << seen;
  }
  EPS_CHECK_OK(queue->wait_value(words, 5, WaitCondition::kGreaterEqual, ValueWidth::k64, kWaitSeconds));
  EPS_CHECK_OK(queue->write_value(flag.data(), 3, ValueWidth::k64));
  if (AssertionResult held = still_held(*queue, "a wait on registered host memory"); !held) return held;
  std::atomic_ref<std::uint64_t>(host.get()[0]).store(5, std::memory_order_release);
  EPS_CHECK_OK(queue->synchronize(Deadline(kWaitSeconds)));
  if (read_one<std::uint64_t>(device, flag.data()) != 3)
    return AssertionFailure() << "the host did not release the wait";
  EPS_CHECK_REFUSED(device.register_host_memory(nullptr, 64).status(), "register_host_memory");
  return AssertionSuccess();
}

AssertionResult check_ipc_refusals(Device& device) {
  Buffer memory = value_or_throw(device.allocate(1024, MemoryKind::kDevice));
  std::vector<std::uint8_t> host(64);
  EPS_CHECK_REFUSED(device.export_memory(memory.as<std::byte>() + 256, 16).status(), "export_memory");
  EPS_CHECK_REFUSED(device.export_memory(memory.data(), 2048).status(), "export_memory.bytes");
  EPS_CHECK_REFUSED(device.export_memory(host.data(), 64).status(), "export_memory");
  IpcHandle foreign;
  std::snprintf(foreign.backend, sizeof foreign.backend, "%s", "tpu");
  foreign.bytes = 64;
  EPS_CHECK_REFUSED(device.import_memory(foreign).status(), "import_memory");
  return AssertionSuccess();
}

AssertionResult check_ipc_across_processes(Device& device, const std::string& spec) {
  std::vector<std::uint8_t> initial = pattern(kIpcBytes / 2, 4);
  initial.resize(kIpcBytes, 0);
  Buffer memory = upload(device, initial);
  const IpcHandle handle = value_or_throw(device.export_memory(memory.data(), kIpcBytes));
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  environment.push_back("EPS_TEST_IPC_HANDLE=" + hex(&handle, sizeof handle));
  environment.push_back("EPS_TEST_IPC_DEVICE=" + spec);
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string program = "/proc/self/exe";
  std::string filter = "--gtest_filter=IpcChild.*";
  char* argv[] = {program.data(), filter.data(), nullptr};
  pid_t child = 0;
  if (const int error = posix_spawn(&child, program.c_str(), nullptr, nullptr, argv, envp.data());
      error != 0) {
    return AssertionFailure() << "posix_spawn of the child: " << std::strerror(error);
  }
  const Deadline deadline(kWaitSeconds);
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (deadline.expired()) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return AssertionFailure() << "the child importing the memory did not finish in " << kWaitSeconds
                                << " s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return AssertionFailure() << "the child importing the memory failed (status " << status
                              << "; see its output)";
  }
  std::vector<std::uint8_t> expected = pattern(kIpcBytes / 2, 4);
  const std::vector<std::uint8_t> answer = pattern(kIpcBytes / 2, 5);
  expected.insert(expected.end(), answer.begin(), answer.end());
  EPS_CHECK_EQUAL("what the child wrote into the exported memory", expected,
                  download<std::uint8_t>(device, memory, kIpcBytes));
  return AssertionSuccess();
}

AssertionResult ipc_child(bool* is_child) {
  const char* text = std::getenv("EPS_TEST_IPC_HANDLE");
  const char* spec = std::getenv("EPS_TEST_IPC_DEVICE");
  *is_child = text != nullptr && spec != nullptr;
  if (!*is_child) return AssertionSuccess();
  IpcHandle handle;
  if (!unhex(text, &handle, sizeof handle)) return AssertionFailure() << "EPS_TEST_IPC_HANDLE is malformed";
  std::unique_ptr<Device> device = value_or_throw(make_device(spec));
  std::unique_ptr<MappedMemory> mapped = value_or_throw(device->import_memory(handle));
  if (mapped->bytes() != kIpcBytes) return AssertionFailure() << "imported " << mapped->bytes() << " bytes";
  std::vector<std::uint8_t> first(kIpcBytes / 2);
  EPS_CHECK_OK(device->copy(first.data(), mapped->data(), first.size()));
  EPS_CHECK_EQUAL("the exporter's bytes, read in the importing process", pattern(kIpcBytes / 2, 4), first);
  const std::vector<std::uint8_t> answer = pattern(kIpcBytes / 2, 5);
  EPS_CHECK_OK(
      device->copy(static_cast<std::byte*>(mapped->data()) + kIpcBytes / 2, answer.data(), answer.size()));
  EPS_CHECK_OK(device->synchronize());
  return AssertionSuccess();
}

}  // namespace eps::device::testing
