#include "impls/device/cpu/cpu_device.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "impls/device/kernels/kernel_bodies.hpp"

namespace eps::device {
namespace {

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
  RangeFunction range[3];  // by CpuIsa
};

#define EPS_CPU_ENTRY(camel, snake, Args)                                                 \
  KernelEntry{sizeof(Args),                                                               \
              [](const void* a) { return snake##_extent(*static_cast<const Args*>(a)); }, \
              {snake##_portable, snake##_avx2, snake##_avx512}},
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

class CpuDevice final : public Device {
 public:
  CpuDevice(int threads, CpuIsa isa, bool host_accessible, HmemInterface hmem)
      : threads_(threads), isa_(isa), host_accessible_(host_accessible), hmem_(hmem) {
    properties_.backend = "cpu";
    properties_.name = cpu_model();
    properties_.architecture = fmt::format("x86-64 {}", cpu_isa_name(isa));
    properties_.memory_bytes =
        static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  }

  const DeviceProperties& properties() const override { return properties_; }
  bool host_accessible() const override { return host_accessible_; }
  HmemInterface hmem_interface() const override { return hmem_; }

  Result<DmaBuf> export_dma_buf(const void* data, std::size_t bytes) override {
    if (data == nullptr || bytes == 0) {
      return invalid_argument("export_dma_buf", "needs a non-null range of at least 1 byte, got {} bytes",
                              bytes);
    }
    return Status(
        StatusCode::kUnavailable,
        "cpu device: its memory is host memory, which has no dma-buf to export (fabrics register it "
        "directly)");
  }

  Result<Buffer> allocate(std::size_t bytes, MemoryKind kind) override {
    if (bytes == 0)
      return invalid_argument("bytes", "must be at least 1 to allocate {} memory", memory_kind_name(kind));
    void* data = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    if (data == nullptr) {
      return Status(
          StatusCode::kEnvironment,
          fmt::format("cpu device: allocating {} bytes of {} memory failed", bytes, memory_kind_name(kind)));
    }
    return Buffer(this, data, bytes, kind);
  }

  Status copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memmove(dst, src, bytes);
    return Status();
  }

  Status fill(void* dst, std::uint8_t value, std::size_t bytes) override {
    if (bytes > 0) std::memset(dst, value, bytes);
    return Status();
  }

  Status synchronize() override { return Status(); }

  Status launch(KernelId id, const void* args, std::size_t args_bytes) override {
    const auto index = static_cast<std::size_t>(id);
    if (index >= std::size(kKernels)) return invalid_argument("kernel", "no kernel with id {}", index);
    const KernelEntry& kernel = kKernels[index];
    if (args_bytes != kernel.args_bytes) {
      return invalid_argument("kernel args", "{} takes {} bytes of arguments, got {}", kernel_name(id),
                              kernel.args_bytes, args_bytes);
    }
    const std::int64_t extent = kernel.extent(args);
    const RangeFunction run = kernel.range[static_cast<int>(isa_)];
    const std::int64_t threads = std::min<std::int64_t>(threads_, extent / kMinIndicesPerThread);
    if (threads <= 1) {
      run(args, 0, extent);
      return Status();
    }
    std::vector<std::jthread> workers;
    const std::int64_t per_thread = (extent + threads - 1) / threads;
    for (std::int64_t t = 1; t < threads; ++t) {
      workers.emplace_back([=] { run(args, t * per_thread, std::min(extent, (t + 1) * per_thread)); });
    }
    run(args, 0, std::min(extent, per_thread));
    return Status();
  }

 protected:
  void release(void* data, MemoryKind) noexcept override { std::free(data); }

 private:
  int threads_;
  CpuIsa isa_;
  bool host_accessible_;
  HmemInterface hmem_;
  DeviceProperties properties_;
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
  return std::unique_ptr<Device>(
      std::make_unique<CpuDevice>(options.threads, isa, options.host_accessible,
                                  options.system_hmem ? HmemInterface::kSystem : HmemInterface::kNone));
}

}  // namespace eps::device
