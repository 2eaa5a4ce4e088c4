// A test double of a GPU plugin (device_plugin.h) that runs on the host: memory is host memory and a launch
// runs the kernel body over its index space on the calling thread. Built as libeps_device_cuda.so in a
// directory of its own, it lets the tests drive the whole loader and the Device over a plugin
// (plugin_device.hpp) on machines without a GPU, with the kernel checks the real plugins run.
//
// EPS_HOST_PLUGIN_KERNEL_COUNT, when defined, is the kernel count the table claims: a plugin built for
// another set of kernels, which the loader must refuse.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "impls/device/gpu/device_plugin.h"
#include "impls/device/kernels/kernel_bodies.hpp"

namespace {

constexpr int kKernelCount = static_cast<int>(eps::device::KernelId::kCount);
#ifndef EPS_HOST_PLUGIN_KERNEL_COUNT
#define EPS_HOST_PLUGIN_KERNEL_COUNT kKernelCount
#endif

thread_local std::string last_error_text;

int fail(std::string message) {
  last_error_text = std::move(message);
  return 1;
}

struct Kernel {
  std::size_t args_bytes;
  void (*run)(const void* args);
};

#define EPS_HOST_RUN(camel, snake, Args)                                          \
  void run_##snake(const void* raw) {                                             \
    eps::device::Args args;                                                       \
    std::memcpy(&args, raw, sizeof(args));                                        \
    const std::int64_t extent = eps::device::snake##_extent(args);                \
    for (std::int64_t i = 0; i < extent; ++i) eps::device::snake##_body(i, args); \
  }
EPS_DEVICE_KERNELS(EPS_HOST_RUN)
#undef EPS_HOST_RUN

#define EPS_HOST_ENTRY(camel, snake, Args) Kernel{sizeof(eps::device::Args), &run_##snake},
const Kernel kKernels[] = {EPS_DEVICE_KERNELS(EPS_HOST_ENTRY)};
#undef EPS_HOST_ENTRY

int device_count(int* count) {
  *count = 1;
  return 0;
}

int properties(int ordinal, eps_device_properties_v1* out) {
  if (ordinal != 0) return fail("properties: no device " + std::to_string(ordinal));
  std::memset(out, 0, sizeof(*out));
  std::strcpy(out->name, "epsuite host test plugin");
  std::strcpy(out->architecture, "host");
  std::strcpy(out->pci_bus_id, "0000:00:00.0");
  out->memory_bytes = 1ull << 30;
  return 0;
}

int open_context(int ordinal, void** context) {
  if (ordinal != 0) return fail("open: no device " + std::to_string(ordinal));
  *context = new int(ordinal);
  return 0;
}

int close_context(void* context) {
  delete static_cast<int*>(context);
  return 0;
}

// Allocations above 1 GiB fail, as a GPU's would when its memory is exhausted.
int allocate(void*, std::size_t bytes, int kind, void** out) {
  *out = nullptr;
  if (kind != 0 && kind != 1) return fail("allocate: unknown memory kind " + std::to_string(kind));
  if (bytes > (1ull << 30))
    return fail("hostMalloc of " + std::to_string(bytes) + " bytes on device 0: out of memory");
  *out = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  return *out != nullptr ? 0 : fail("aligned_alloc of " + std::to_string(bytes) + " bytes failed");
}

int release(void*, void* data, int) {
  std::free(data);
  return 0;
}

int copy(void*, void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return 0;
}

int fill(void*, void* dst, int value, std::size_t bytes) {
  if (bytes > 0) std::memset(dst, value, bytes);
  return 0;
}

int synchronize(void*) { return 0; }

int launch(void*, int kernel, const void* args, std::size_t args_bytes) {
  if (kernel < 0 || kernel >= kKernelCount) return fail("launch: kernel id " + std::to_string(kernel));
  if (args_bytes != kKernels[kernel].args_bytes) return fail("launch: wrong argument size");
  kKernels[kernel].run(args);
  return 0;
}

const char* last_error() { return last_error_text.c_str(); }

int export_dma_buf(void*, const void*, std::size_t, int* fd, std::uint64_t* offset) {
  *fd = -1;
  *offset = 0;
  return fail("host plugin: host memory has no dma-buf to export");
}

const eps_device_plugin_v1 kPlugin = {
    EPS_DEVICE_PLUGIN_ABI_VERSION,
    "cuda",
    EPS_HOST_PLUGIN_KERNEL_COUNT,
    &device_count,
    &properties,
    &open_context,
    &close_context,
    &allocate,
    &release,
    &copy,
    &fill,
    &synchronize,
    &launch,
    &last_error,
    &export_dma_buf,
};

}  // namespace

// Declared in a namespace because the name is also the struct's typedef at global scope (gpu_plugin.cu).
namespace eps_device_plugin_export {
extern "C" __attribute__((visibility("default"))) const ::eps_device_plugin_v1* eps_device_plugin_v1(void) {
  return &kPlugin;
}
}  // namespace eps_device_plugin_export
