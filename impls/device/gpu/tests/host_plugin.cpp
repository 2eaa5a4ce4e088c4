// A test double of a GPU plugin (device_plugin.h) that runs on the host: each context is a `cpu` device
// (impls/device/cpu), and the plugin's C entry points are a thin layer over its Device interface. Built as
// libeps_device_cuda.so in a directory of its own, it lets the tests drive the whole loader and the Device
// over a plugin (plugin_device.hpp) on machines without a GPU: the queues, events, stream memory operations,
// IPC (the cpu device's memfd handles, packed into the 64 handle bytes), host registration, graphs and
// pointer kinds of version 3, with the kernel and queue checks the real plugins run.
//
// Build variants (CMakeLists.txt):
// - EPS_HOST_PLUGIN_KERNEL_COUNT: the kernel count the table claims (a plugin built for other kernels,
//   which the loader must refuse);
// - EPS_HOST_PLUGIN_ABI_V2: a version-2 plugin exporting its table under the name version-2 plugins used
//   before the headers were split (eps_device_plugin_v1), which the loader must take as the synchronous
//   subset.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "impls/device/cpu/cpu_device.hpp"
#include "impls/device/gpu/device_plugin.h"

namespace {

using eps::device::Device;
using eps::device::Event;
using eps::device::Graph;
using eps::device::MappedMemory;
using eps::device::MemoryKind;
using eps::device::Queue;
using eps::device::ValueWidth;
using eps::device::WaitCondition;

constexpr int kKernelCount = static_cast<int>(eps::device::KernelId::kCount);
#ifndef EPS_HOST_PLUGIN_KERNEL_COUNT
#define EPS_HOST_PLUGIN_KERNEL_COUNT kKernelCount
#endif

thread_local std::string last_error_text;

int fail(std::string message) {
  last_error_text = std::move(message);
  return 1;
}

int check(const eps::Status& status) { return status.ok() ? 0 : fail("host plugin: " + status.message()); }

// Hands an object the cpu device made to the caller as a plugin handle (released: the caller frees it).
template <typename T>
int hand_out(eps::Result<std::unique_ptr<T>> made, void** handle) {
  if (!made.ok()) return check(made.status());
  *handle = made->release();
  return 0;
}

struct Context {
  std::unique_ptr<Device> device;
  std::mutex mutex;
  std::map<std::uintptr_t, eps::device::Buffer> buffers;  // every allocation, by address
  std::map<std::uintptr_t, std::size_t> device_memory;    // kDevice allocations and imports: start -> bytes
  std::map<std::uintptr_t, std::unique_ptr<MappedMemory>> mappings;  // imports and registrations
};

Context* context_of(void* context) { return static_cast<Context*>(context); }
Queue& queue_of(Context* c, void* queue) {
  return queue != nullptr ? *static_cast<Queue*>(queue) : c->device->queue();
}

int device_count(int* count) {
  *count = 1;
  return 0;
}

int properties(int ordinal, eps_device_properties_v2* out) {
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
  eps::Result<std::unique_ptr<Device>> device = eps::device::make_cpu_device();
  if (!device.ok()) return check(device.status());
  *context = new Context{std::move(device).value(), {}, {}, {}, {}};
  return 0;
}

int close_context(void* context) {
  Context* c = context_of(context);
  const int rc = check(c->device->synchronize());
  delete c;
  return rc;
}

// Allocations above 1 GiB fail, as a GPU's would when its memory is exhausted.
int allocate(void* context, std::size_t bytes, int kind, void** out) {
  Context* c = context_of(context);
  *out = nullptr;
  if (kind != 0 && kind != 1) return fail("allocate: unknown memory kind " + std::to_string(kind));
  if (bytes > (1ull << 30))
    return fail("hostMalloc of " + std::to_string(bytes) + " bytes on device 0: out of memory");
  eps::Result<eps::device::Buffer> buffer =
      c->device->allocate(bytes, kind == 0 ? MemoryKind::kHost : MemoryKind::kDevice);
  if (!buffer.ok()) return check(buffer.status());
  *out = buffer->data();
  const std::lock_guard<std::mutex> lock(c->mutex);
  if (kind == 1) c->device_memory[reinterpret_cast<std::uintptr_t>(*out)] = bytes;
  c->buffers.emplace(reinterpret_cast<std::uintptr_t>(*out), std::move(buffer).value());
  return 0;
}

int release(void* context, void* data, int) {
  Context* c = context_of(context);
  const std::lock_guard<std::mutex> lock(c->mutex);
  c->device_memory.erase(reinterpret_cast<std::uintptr_t>(data));
  c->buffers.erase(reinterpret_cast<std::uintptr_t>(data));
  return 0;
}

const char* last_error() { return last_error_text.c_str(); }

int export_dma_buf(void*, const void*, std::size_t, int* fd, std::uint64_t* offset) {
  *fd = -1;
  *offset = 0;
  return fail("host plugin: host memory has no dma-buf to export");
}

#ifdef EPS_HOST_PLUGIN_ABI_V2

int copy_v2(void* context, void* dst, const void* src, std::size_t bytes) {
  return check(context_of(context)->device->copy(dst, src, bytes));
}
int fill_v2(void* context, void* dst, int value, std::size_t bytes) {
  return check(context_of(context)->device->fill(dst, static_cast<std::uint8_t>(value), bytes));
}
int synchronize_v2(void* context) { return check(context_of(context)->device->synchronize()); }
int launch_v2(void* context, int kernel, const void* args, std::size_t args_bytes) {
  return check(
      context_of(context)->device->launch(static_cast<eps::device::KernelId>(kernel), args, args_bytes));
}

const eps_device_plugin_v2 kPlugin = {
    EPS_DEVICE_PLUGIN_ABI_V2,
    "cuda",
    EPS_HOST_PLUGIN_KERNEL_COUNT,
    &device_count,
    &properties,
    &open_context,
    &close_context,
    &allocate,
    &release,
    &copy_v2,
    &fill_v2,
    &synchronize_v2,
    &launch_v2,
    &last_error,
    &export_dma_buf,
};

}  // namespace

// The name version-2 plugins exported before the headers were split (device_plugin_v2.h), in a namespace of
// its own like gpu_plugin.cu's entry; with C language linkage the symbol is plain eps_device_plugin_v1.
namespace eps_device_plugin_export {
extern "C" __attribute__((visibility("default"))) const ::eps_device_plugin_v2* eps_device_plugin_v1(void) {
  return &kPlugin;
}
}  // namespace eps_device_plugin_export

#else

int queue_create(void* context, void** queue) {
  return hand_out(context_of(context)->device->create_queue(), queue);
}

int queue_destroy(void*, void* queue) {
  delete static_cast<Queue*>(queue);
  return 0;
}

int queue_query(void* context, void* queue, int* idle) {
  const eps::Result<bool> is_idle = queue_of(context_of(context), queue).idle();
  if (!is_idle.ok()) return check(is_idle.status());
  *idle = *is_idle ? 1 : 0;
  return 0;
}

int copy(void* context, void* queue, void* dst, const void* src, std::size_t bytes) {
  return check(queue_of(context_of(context), queue).copy(dst, src, bytes));
}

int fill(void* context, void* queue, void* dst, int value, std::size_t bytes) {
  return check(queue_of(context_of(context), queue).fill(dst, static_cast<std::uint8_t>(value), bytes));
}

int launch(void* context, void* queue, int kernel, const void* args, std::size_t args_bytes) {
  if (kernel < 0 || kernel >= kKernelCount) return fail("launch: kernel id " + std::to_string(kernel));
  return check(queue_of(context_of(context), queue)
                   .launch(static_cast<eps::device::KernelId>(kernel), args, args_bytes));
}

ValueWidth width_of(int width_bytes) { return width_bytes == 4 ? ValueWidth::k32 : ValueWidth::k64; }

int write_value(void* context, void* queue, void* address, std::uint64_t value, int width_bytes) {
  return check(queue_of(context_of(context), queue).write_value(address, value, width_of(width_bytes)));
}

int wait_value(void* context, void* queue, const void* address, std::uint64_t value, int width_bytes,
               int condition, double timeout_seconds) {
  return check(queue_of(context_of(context), queue)
                   .wait_value(address, value,
                               condition == 1 ? WaitCondition::kEqual : WaitCondition::kGreaterEqual,
                               width_of(width_bytes), timeout_seconds));
}

int event_create(void* context, void** event) {
  return hand_out(context_of(context)->device->create_event(), event);
}

int event_destroy(void*, void* event) {
  delete static_cast<Event*>(event);
  return 0;
}

int event_record(void* context, void* event, void* queue) {
  return check(queue_of(context_of(context), queue).record(*static_cast<Event*>(event)));
}

int event_query(void*, void* event, int* done) {
  const eps::Result<bool> is_done = static_cast<Event*>(event)->done();
  if (!is_done.ok()) return check(is_done.status());
  *done = *is_done ? 1 : 0;
  return 0;
}

int queue_wait_event(void* context, void* queue, void* event) {
  return check(queue_of(context_of(context), queue).wait(*static_cast<Event*>(event)));
}

int event_elapsed_ms(void* context, void* start, void* end, float* milliseconds) {
  const eps::Result<double> seconds =
      context_of(context)->device->elapsed_seconds(*static_cast<Event*>(start), *static_cast<Event*>(end));
  if (!seconds.ok()) return check(seconds.status());
  *milliseconds = static_cast<float>(*seconds * 1e3);
  return 0;
}

// The plugin handle: the exported bytes, then the cpu handle's first 56 data bytes (its description uses
// 32).
constexpr std::size_t kPackedData = EPS_DEVICE_IPC_HANDLE_BYTES - sizeof(std::uint64_t);

int ipc_export(void* context, const void* data, void* handle) {
  Context* c = context_of(context);
  std::size_t bytes = 0;
  {
    const std::lock_guard<std::mutex> lock(c->mutex);
    const auto it = c->device_memory.find(reinterpret_cast<std::uintptr_t>(data));
    if (it == c->device_memory.end()) return fail("ipc_export: not the start of a device allocation");
    bytes = it->second;
  }
  const eps::Result<eps::device::IpcHandle> exported = c->device->export_memory(data, bytes);
  if (!exported.ok()) return check(exported.status());
  std::memcpy(handle, &exported->bytes, sizeof exported->bytes);
  std::memcpy(static_cast<std::byte*>(handle) + sizeof exported->bytes, exported->data.data(), kPackedData);
  return 0;
}

int ipc_import(void* context, const void* handle, void** data) {
  Context* c = context_of(context);
  eps::device::IpcHandle cpu_handle;
  std::snprintf(cpu_handle.backend, sizeof cpu_handle.backend, "%s", "cpu");
  std::memcpy(&cpu_handle.bytes, handle, sizeof cpu_handle.bytes);
  std::memcpy(cpu_handle.data.data(), static_cast<const std::byte*>(handle) + sizeof cpu_handle.bytes,
              kPackedData);
  eps::Result<std::unique_ptr<MappedMemory>> mapped = c->device->import_memory(cpu_handle);
  if (!mapped.ok()) return check(mapped.status());
  *data = (*mapped)->data();
  const std::lock_guard<std::mutex> lock(c->mutex);
  c->device_memory[reinterpret_cast<std::uintptr_t>(*data)] = (*mapped)->bytes();
  c->mappings.emplace(reinterpret_cast<std::uintptr_t>(*data), std::move(mapped).value());
  return 0;
}

int ipc_close(void* context, void* data) {
  Context* c = context_of(context);
  const std::lock_guard<std::mutex> lock(c->mutex);
  c->device_memory.erase(reinterpret_cast<std::uintptr_t>(data));
  c->mappings.erase(reinterpret_cast<std::uintptr_t>(data));
  return 0;
}

int host_register(void* context, void* data, std::size_t bytes, void** device_address) {
  Context* c = context_of(context);
  eps::Result<std::unique_ptr<MappedMemory>> registered = c->device->register_host_memory(data, bytes);
  if (!registered.ok()) return check(registered.status());
  *device_address = (*registered)->data();
  const std::lock_guard<std::mutex> lock(c->mutex);
  c->mappings.emplace(reinterpret_cast<std::uintptr_t>(data), std::move(registered).value());
  return 0;
}

int host_unregister(void* context, void* data) {
  Context* c = context_of(context);
  const std::lock_guard<std::mutex> lock(c->mutex);
  c->mappings.erase(reinterpret_cast<std::uintptr_t>(data));
  return 0;
}

int capture_begin(void* context, void* queue) {
  return check(queue_of(context_of(context), queue).begin_capture());
}

int capture_end(void* context, void* queue, void** graph) {
  return hand_out(queue_of(context_of(context), queue).end_capture(), graph);
}

int graph_launch(void* context, void* graph, void* queue) {
  return check(queue_of(context_of(context), queue).replay(*static_cast<Graph*>(graph)));
}

int graph_destroy(void*, void* graph) {
  delete static_cast<Graph*>(graph);
  return 0;
}

int pointer_kind(void* context, const void* pointer, int* kind) {
  Context* c = context_of(context);
  const auto at = reinterpret_cast<std::uintptr_t>(pointer);
  const std::lock_guard<std::mutex> lock(c->mutex);
  auto it = c->device_memory.upper_bound(at);
  *kind = 0;
  if (it != c->device_memory.begin()) {
    --it;
    *kind = at < it->first + it->second ? 1 : 0;
  }
  return 0;
}

const eps_device_plugin_v3 kPlugin = {
    EPS_DEVICE_PLUGIN_ABI_V3,
    "cuda",
    EPS_HOST_PLUGIN_KERNEL_COUNT,
    &device_count,
    &properties,
    &open_context,
    &close_context,
    &allocate,
    &release,
    &last_error,
    &export_dma_buf,
    &queue_create,
    &queue_destroy,
    &queue_query,
    &copy,
    &fill,
    &launch,
    &write_value,
    &wait_value,
    &event_create,
    &event_destroy,
    &event_record,
    &event_query,
    &queue_wait_event,
    &event_elapsed_ms,
    &ipc_export,
    &ipc_import,
    &ipc_close,
    &host_register,
    &host_unregister,
    &capture_begin,
    &capture_end,
    &graph_launch,
    &graph_destroy,
    &pointer_kind,
};

}  // namespace

// Declared in a namespace because the name is also the struct's typedef at global scope (gpu_plugin.cu).
namespace eps_device_plugin_export {
extern "C" __attribute__((visibility("default"))) const ::eps_device_plugin_v3* eps_device_plugin_v3(void) {
  return &kPlugin;
}
}  // namespace eps_device_plugin_export

#endif
