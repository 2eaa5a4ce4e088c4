#include "impls/device/cpu/cpu_device.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "impls/device/cpu/cpu_memory.hpp"
#include "impls/device/cpu/cpu_queue.hpp"
#include "impls/device/kernels/kernel_bodies.hpp"
#include "impls/device/kernels/kernel_pointers.hpp"

namespace eps::device {
namespace {

using cpu::CpuEvent;
using cpu::CpuMemory;
using cpu::CpuQueue;

// One kernel over [begin, end) of its index space.
using RangeFunction = void (*)(const void* args, std::int64_t begin, std::int64_t end);

// AVX2 has 16 vector registers: tree_gemm runs its 4 x 4 tiles as 2 x 2 blocks there (8 accumulators of 2
// ymm each, the reference AVX2 kernel's blocking); every other body is the common one.
template <typename Args, typename Body>
inline void avx2_body(std::int64_t i, const Args& args, Body body) {
  if constexpr (std::is_same_v<Args, TreeGemmArgs>) {
    tree_gemm_tile<2, 2>(i, args);
  } else {
    body(i, args);
  }
}

// The loops of every kernel, per instruction set. `flatten` inlines the body and everything it calls, so the
// target attribute applies to all of it and no out-of-line copy of a shared inline function is compiled
// with wider instructions than the portable build allows.
#define EPS_CPU_RANGES(camel, snake, Args)                                                             \
  void snake##_portable(const void* a, std::int64_t begin, std::int64_t end) {                         \
    const Args& args = *static_cast<const Args*>(a);                                                   \
    for (std::int64_t i = begin; i < end; ++i) snake##_body(i, args);                                  \
  }                                                                                                    \
  __attribute__((target("avx2,fma"), flatten)) void snake##_avx2(const void* a, std::int64_t begin,    \
                                                                 std::int64_t end) {                   \
    const Args& args = *static_cast<const Args*>(a);                                                   \
    for (std::int64_t i = begin; i < end; ++i) avx2_body(i, args, snake##_body);                       \
  }                                                                                                    \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"), flatten)) void snake##_avx512( \
      const void* a, std::int64_t begin, std::int64_t end) {                                           \
    const Args& args = *static_cast<const Args*>(a);                                                   \
    for (std::int64_t i = begin; i < end; ++i) snake##_body(i, args);                                  \
  }
EPS_DEVICE_KERNELS(EPS_CPU_RANGES)
#undef EPS_CPU_RANGES

struct KernelEntry {
  std::size_t args_bytes;
  std::int64_t (*extent)(const void* args);
  RangeFunction range[3];                 // by CpuIsa
  std::span<const std::size_t> pointers;  // offsets of the pointer fields (kernel_pointers.hpp)
};

#define EPS_CPU_ENTRY(camel, snake, Args)                                                 \
  KernelEntry{sizeof(Args),                                                               \
              [](const void* a) { return snake##_extent(*static_cast<const Args*>(a)); }, \
              {snake##_portable, snake##_avx2, snake##_avx512},                           \
              PointerFields<Args>::offsets},
const KernelEntry kKernels[] = {EPS_DEVICE_KERNELS(EPS_CPU_ENTRY)};
#undef EPS_CPU_ENTRY
static_assert(std::size(kKernels) == static_cast<std::size_t>(KernelId::kCount));

bool cpu_supports(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable:
      return true;
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }
  return false;
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "host CPU";
}

constexpr std::size_t kAlignment = 64;
// Fewer indices than this per thread run on the calling thread alone: not worth a wake-up.
constexpr std::int64_t kMinIndicesPerThread = 64;

// Host memory registered with a `cpu` device: its operations address host memory as it is.
class HostRegistration final : public MappedMemory {
 public:
  HostRegistration(void* data, std::size_t bytes) : MappedMemory(data, bytes) {}
};

class CpuDevice final : public Device, private cpu::QueueHost {
 public:
  CpuDevice(const CpuDeviceOptions& options, CpuIsa isa, std::unique_ptr<CpuMemory> memory)
      : threads_(options.threads),
        isa_(isa),
        host_accessible_(options.host_accessible && !options.isolated),
        hmem_(options.system_hmem ? HmemInterface::kSystem : HmemInterface::kNone),
        memory_(std::move(memory)),
        default_queue_(std::make_unique<CpuQueue>(host(), 0)) {
    properties_.backend = options.isolated ? "cpu-isolated" : "cpu";
    properties_.name = cpu_model();
    properties_.architecture = fmt::format("x86-64 {}", cpu_isa_name(isa));
    properties_.memory_bytes = memory_->capacity();
  }
  ~CpuDevice() override { default_queue_.reset(); }

  const DeviceProperties& properties() const override { return properties_; }
  bool host_accessible() const override { return host_accessible_; }
  HmemInterface hmem_interface() const override { return hmem_; }

  Result<DmaBuf> export_dma_buf(const void* data, std::size_t bytes) override {
    if (data == nullptr || bytes == 0) {
      return invalid_argument("export_dma_buf", "needs a non-null range of at least 1 byte, got {} bytes",
                              bytes);
    }
    return Status(StatusCode::kUnavailable,
                  fmt::format("{} device: its memory is host memory, which has no dma-buf to export (fabrics "
                              "register it directly)",
                              properties_.backend));
  }

  Result<Buffer> allocate(std::size_t bytes, MemoryKind kind) override {
    if (bytes == 0)
      return invalid_argument("bytes", "must be at least 1 to allocate {} memory", memory_kind_name(kind));
    if (kind == MemoryKind::kDevice) {
      EPS_ASSIGN_OR_RETURN(void* data, memory_->allocate(bytes));
      return Buffer(this, data, bytes, kind);
    }
    void* data = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    if (data == nullptr) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("{} device: allocating {} bytes of {} memory failed", properties_.backend,
                                bytes, memory_kind_name(kind)));
    }
    return Buffer(this, data, bytes, kind);
  }

  Queue& queue() override { return *default_queue_; }
  Result<std::unique_ptr<Queue>> create_queue() override {
    return std::unique_ptr<Queue>(std::make_unique<CpuQueue>(host(), ++queues_made_));
  }
  Result<std::unique_ptr<Event>> create_event() override {
    return std::unique_ptr<Event>(std::make_unique<CpuEvent>(&host()));
  }
  Result<double> elapsed_seconds(Event& start, Event& end) override {
    EPS_ASSIGN_OR_RETURN(const std::int64_t from, completed_time(start, "elapsed_seconds.start"));
    EPS_ASSIGN_OR_RETURN(const std::int64_t to, completed_time(end, "elapsed_seconds.end"));
    return static_cast<double>(to - from) * 1e-9;
  }

  Result<IpcHandle> export_memory(const void* data, std::size_t bytes) override {
    return memory_->export_memory(data, bytes);
  }
  Result<std::unique_ptr<MappedMemory>> import_memory(const IpcHandle& handle) override {
    return memory_->import_memory(handle);
  }
  Result<std::unique_ptr<MappedMemory>> register_host_memory(void* data, std::size_t bytes) override {
    if (data == nullptr || bytes == 0) {
      return invalid_argument("register_host_memory",
                              "needs a non-null range of at least 1 byte, got {} bytes", bytes);
    }
    if (memory_->is_device(data)) {
      return invalid_argument("register_host_memory", "{} is device memory of this device, not host memory",
                              data);
    }
    return std::unique_ptr<MappedMemory>(std::make_unique<HostRegistration>(data, bytes));
  }

 protected:
  void release(void* data, MemoryKind kind) noexcept override {
    if (kind == MemoryKind::kDevice) {
      memory_->release(data);
    } else {
      std::free(data);
    }
  }

 private:
  cpu::QueueHost& host() { return *this; }
  // cpu::QueueHost
  const CpuMemory& memory() const override { return *memory_; }
  const std::string& backend_name() const override { return properties_.backend; }
  double wait_seconds() const override { return timeout_seconds(); }
  void add_copies(const CopyLedger& entry) override { record_copies(entry); }

  Status prepare_kernel(KernelId id, const void* args, std::size_t args_bytes,
                        std::byte* out) const override {
    const auto index = static_cast<std::size_t>(id);
    if (index >= std::size(kKernels)) return invalid_argument("kernel", "no kernel with id {}", index);
    const KernelEntry& kernel = kKernels[index];
    if (args_bytes != kernel.args_bytes) {
      return invalid_argument("kernel args", "{} takes {} bytes of arguments, got {}", kernel_name(id),
                              kernel.args_bytes, args_bytes);
    }
    std::memcpy(out, args, args_bytes);
    if (!memory_->isolated()) return Status();  // the private view is the public one
    for (const std::size_t offset : kernel.pointers) {
      void* pointer = nullptr;
      std::memcpy(&pointer, out + offset, sizeof pointer);
      if (pointer == nullptr) continue;
      EPS_ASSIGN_OR_RETURN(
          pointer,
          memory_->translate(pointer, 0, fmt::format("{} argument at offset {}", kernel_name(id), offset)));
      std::memcpy(out + offset, &pointer, sizeof pointer);
    }
    return Status();
  }

  void run_kernel(KernelId id, const void* args) override {
    const KernelEntry& kernel = kKernels[static_cast<std::size_t>(id)];
    const std::int64_t extent = kernel.extent(args);
    const RangeFunction run = kernel.range[static_cast<int>(isa_)];
    const std::int64_t threads = std::min<std::int64_t>(threads_, extent / kMinIndicesPerThread);
    if (threads <= 1) {
      run(args, 0, extent);
      return;
    }
    std::vector<std::jthread> workers;
    const std::int64_t per_thread = (extent + threads - 1) / threads;
    for (std::int64_t t = 1; t < threads; ++t) {
      workers.emplace_back([=] { run(args, t * per_thread, std::min(extent, (t + 1) * per_thread)); });
    }
    run(args, 0, std::min(extent, per_thread));
  }

  // The steady-clock time of a done event of this device.
  Result<std::int64_t> completed_time(Event& event, std::string_view field) {
    auto* cpu_event = dynamic_cast<CpuEvent*>(&event);
    if (cpu_event == nullptr || cpu_event->state()->owner != &host()) {
      return invalid_argument(field, "the event was not made by this {} device", properties_.backend);
    }
    EPS_ASSIGN_OR_RETURN(const bool done, cpu_event->done());
    if (!done || cpu_event->state()->recorded.load() == 0) {
      return invalid_argument(field, "the event is not recorded and done (wait for it first)");
    }
    return cpu_event->state()->time_ns.load(std::memory_order_relaxed);
  }

  int threads_;
  CpuIsa isa_;
  bool host_accessible_;
  HmemInterface hmem_;
  DeviceProperties properties_;
  std::unique_ptr<CpuMemory> memory_;  // before the queues, which run on it
  std::unique_ptr<CpuQueue> default_queue_;
  std::atomic<int> queues_made_{0};
};

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable:
      return "portable";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::vector<CpuIsa> available_cpu_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (cpu_supports(isa)) out.push_back(isa);
  }
  return out;
}

Result<std::unique_ptr<Device>> make_cpu_device(const CpuDeviceOptions& options) {
  if (options.threads < 1 || options.threads > 1024)
    return out_of_range("cpu device threads", 1, 1024, options.threads);
  CpuIsa isa = CpuIsa::kPortable;
  for (CpuIsa candidate : available_cpu_isas()) {
    if (static_cast<int>(candidate) <= static_cast<int>(options.isa)) isa = candidate;
  }
  const auto memory_bytes =
      static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<CpuMemory> memory, CpuMemory::create(memory_bytes, options.isolated));
  return std::unique_ptr<Device>(std::make_unique<CpuDevice>(options, isa, std::move(memory)));
}

}  // namespace eps::device
