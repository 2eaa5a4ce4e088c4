// The GPU device plugin (device_plugin.h): the kernels of kernels/kernel_args.hpp around the bodies of
// kernels/kernel_bodies.hpp, and the runtime calls of eps_device_plugin_v3 (device_plugin_v3.h): queues are
// streams, events are timing events, stream memory operations are the driver's cuStreamWriteValue /
// cuStreamWaitValue (HIP: hipStreamWriteValue / hipStreamWaitValue), IPC is cudaIpc* / hipIpc*, graphs are
// stream captures instantiated into executable graphs. One source for both vendors:
// nvcc builds it into libeps_device_cuda.so (sm_90, --fmad=false), hipcc (-x hip) into libeps_device_hip.so
// (gfx90a, -ffp-contract=off); gpu_runtime.hpp maps the gpu* names onto each runtime.
//
// No fmt and no epsuite library here: the plugin depends on the C++ standard library and its GPU runtime
// only (CUDA's statically linked), so that it loads wherever the driver is.

// First: the vendor runtime must precede the standard headers (gpu_runtime.hpp says why).
#include "impls/device/gpu/gpu_runtime.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "impls/device/gpu/device_plugin.h"
#include "impls/device/kernels/kernel_bodies.hpp"

// The architectures this plugin is built for ("sm_90", "gfx90a"), from the build (a bare token list).
#ifndef EPS_GPU_TARGETS
#define EPS_GPU_TARGETS unknown targets
#endif
#define EPS_GPU_TEXT(...) EPS_GPU_TEXT_INNER(__VA_ARGS__)
#define EPS_GPU_TEXT_INNER(...) #__VA_ARGS__

// Every launch uses blocks of this many threads; the kernels say so (__launch_bounds__), so that the
// compilers may give each thread the registers of a 256-thread block instead of a 1024-thread one.
constexpr int kBlockThreads = 256;

// ---- Kernels: one per entry of EPS_DEVICE_KERNELS, eps_<snake>_kernel (extern "C": the device code
// carries exactly that name, which the fatbinary and code object tests look for), a grid-stride loop over
// the body's index space [0, extent).
#define EPS_GPU_KERNEL(camel, snake, Args)                                                              \
  extern "C" __global__ void __launch_bounds__(kBlockThreads)                                           \
      eps_##snake##_kernel(eps::device::Args args, std::int64_t extent) {                               \
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;                      \
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < extent; \
         i += stride) {                                                                                 \
      eps::device::snake##_body(i, args);                                                               \
    }                                                                                                   \
  }
EPS_DEVICE_KERNELS(EPS_GPU_KERNEL)
#undef EPS_GPU_KERNEL

namespace {

// Grids are capped (the grid-stride loop covers the rest): 65535 blocks of 256 threads keep every GPU busy
// and stay within every vendor's grid limit.
constexpr std::int64_t kMaxBlocks = 65535;
constexpr int kKernelCount = static_cast<int>(eps::device::KernelId::kCount);

thread_local std::string last_error_text;

int fail(std::string message) {
  last_error_text = std::move(message);
  return 1;
}

// "<vendor call><context>: <error string> (<error name>)", the call named from its source text:
// "cudaMalloc of 1024 bytes on device 0: out of memory (cudaErrorMemoryAllocation)".
int fail_call(gpuError_t error, const char* expression, const std::string& context) {
  const std::string name = gpu_call_name(std::string_view(expression, std::strcspn(expression, "(")));
  const std::string text = gpuGetErrorString(error);
  const std::string error_name = gpuGetErrorName(error);
  // HIP's error string is often the name itself ("hipErrorNoDevice"): then it is said once.
  return fail(name + context + ": " + text + (text == error_name ? "" : " (" + error_name + ")"));
}

// Returns 1 from the enclosing function with the failed call's message; `context` is evaluated only then.
#define EPS_GPU_CHECK(expr, context)                                                      \
  do {                                                                                    \
    const gpuError_t eps_gpu_error_ = (expr);                                             \
    if (eps_gpu_error_ != gpuSuccess) return fail_call(eps_gpu_error_, #expr, (context)); \
  } while (0)

std::string on_device(int ordinal) { return " on device " + std::to_string(ordinal); }
std::string of_bytes(std::size_t bytes, int ordinal) {
  return " of " + std::to_string(bytes) + " bytes" + on_device(ordinal);
}

struct Context {
  int ordinal = 0;
  gpuStream_t stream = nullptr;
};

Context* context_of(void* context) { return static_cast<Context*>(context); }

// ---- Launchers: the index space is sized on the host with <snake>_extent (0: nothing to launch).
#define EPS_GPU_LAUNCHER(camel, snake, Args)                                                                \
  int launch_##snake(const void* raw_args, gpuStream_t stream, int ordinal) {                               \
    eps::device::Args args;                                                                                 \
    std::memcpy(&args, raw_args, sizeof(args));                                                             \
    const std::int64_t extent = eps::device::snake##_extent(args);                                          \
    if (extent <= 0) return 0;                                                                              \
    const std::int64_t blocks = std::min((extent + kBlockThreads - 1) / kBlockThreads, kMaxBlocks);         \
    eps_##snake##_kernel<<<static_cast<unsigned>(blocks), kBlockThreads, 0, stream>>>(args, extent);        \
    const gpuError_t error = gpuGetLastError();                                                             \
    if (error == gpuSuccess) return 0;                                                                      \
    return fail_call(error, "eps_" #snake "_kernel",                                                        \
                     " launch (" + std::to_string(blocks) + " blocks of " + std::to_string(kBlockThreads) + \
                         " threads, extent " + std::to_string(extent) + ")" + on_device(ordinal));          \
  }
EPS_DEVICE_KERNELS(EPS_GPU_LAUNCHER)
#undef EPS_GPU_LAUNCHER

struct KernelEntry {
  const char* name;
  std::size_t args_bytes;
  const void* function;  // the host handle of the __global__ function, for gpuFuncGetAttributes
  int (*launch)(const void* args, gpuStream_t stream, int ordinal);
};

// In KernelId order, like every expansion of EPS_DEVICE_KERNELS.
#define EPS_GPU_ENTRY(camel, snake, Args)                         \
  KernelEntry{"eps_" #snake "_kernel", sizeof(eps::device::Args), \
              reinterpret_cast<const void*>(&eps_##snake##_kernel), &launch_##snake},
const KernelEntry kKernels[] = {EPS_DEVICE_KERNELS(EPS_GPU_ENTRY)};
#undef EPS_GPU_ENTRY
static_assert(sizeof(kKernels) / sizeof(kKernels[0]) == kKernelCount);

void copy_text(char* out, std::size_t size, const char* text) { std::snprintf(out, size, "%s", text); }

// ---- The entry points of eps_device_plugin_v3.

int device_count(int* count) {
  *count = 0;
  EPS_GPU_CHECK(gpuGetDeviceCount(count), std::string());
  return 0;
}

int properties(int ordinal, eps_device_properties_v2* out) {
  std::memset(out, 0, sizeof(*out));
  gpuDeviceProp_t prop;
  EPS_GPU_CHECK(gpuGetDeviceProperties(&prop, ordinal), on_device(ordinal));
  copy_text(out->name, sizeof(out->name), prop.name);
  gpu_architecture(prop, out->architecture, sizeof(out->architecture));
  EPS_GPU_CHECK(gpuDeviceGetPCIBusId(out->pci_bus_id, static_cast<int>(sizeof(out->pci_bus_id)), ordinal),
                on_device(ordinal));
  // Lower case, as in sysfs (/sys/bus/pci/devices/0000:1b:00.0), where NICs are matched to GPUs.
  for (char& c : out->pci_bus_id) c = (c >= 'A' && c <= 'F') ? static_cast<char>(c - 'A' + 'a') : c;
  out->memory_bytes = prop.totalGlobalMem;
  out->dma_buf_supported = gpu_dma_buf_supported(ordinal);
  return 0;
}

int open_context(int ordinal, void** context) {
  *context = nullptr;
  EPS_GPU_CHECK(gpuSetDevice(ordinal), on_device(ordinal));
  // A device the plugin has no code for fails here, naming what the plugin was built for, rather than at
  // the first launch.
  for (const KernelEntry& kernel : kKernels) {
    gpuFuncAttributes attributes;
    const gpuError_t error = gpuFuncGetAttributes(&attributes, kernel.function);
    if (error != gpuSuccess) {
      return fail_call(error, "gpuFuncGetAttributes",
                       std::string(" of ") + kernel.name + on_device(ordinal) +
                           " (the plugin holds code for " EPS_GPU_TEXT(EPS_GPU_TARGETS) " only)");
    }
  }
  Context* created = new (std::nothrow) Context{ordinal, nullptr};
  if (created == nullptr) return fail("cannot allocate a plugin context" + on_device(ordinal));
  const gpuError_t error = gpuStreamCreate(&created->stream);
  if (error != gpuSuccess) {
    delete created;
    return fail_call(error, "gpuStreamCreate", on_device(ordinal));
  }
  *context = created;
  return 0;
}

// Waits for the stream and frees the context even when a call fails; the first failure is reported.
int close_context(void* context) {
  Context* c = context_of(context);
  if (c == nullptr) return 0;
  int rc = 0;
  gpuError_t error = gpuSetDevice(c->ordinal);
  if (error == gpuSuccess) {
    error = gpuStreamSynchronize(c->stream);
    if (error != gpuSuccess) rc = fail_call(error, "gpuStreamSynchronize", on_device(c->ordinal));
    error = gpuStreamDestroy(c->stream);
    if (error != gpuSuccess && rc == 0) rc = fail_call(error, "gpuStreamDestroy", on_device(c->ordinal));
  } else {
    rc = fail_call(error, "gpuSetDevice", on_device(c->ordinal));
  }
  delete c;
  return rc;
}

int allocate(void* context, std::size_t bytes, int kind, void** out) {
  Context* c = context_of(context);
  *out = nullptr;
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  if (kind == 0) {
    EPS_GPU_CHECK(gpuMallocHost(out, bytes), of_bytes(bytes, c->ordinal));
  } else if (kind == 1) {
    EPS_GPU_CHECK(gpuMalloc(out, bytes), of_bytes(bytes, c->ordinal));
  } else {
    return fail("allocate: unknown memory kind " + std::to_string(kind) + " (0 pinned host, 1 device)");
  }
  return 0;
}

int release(void* context, void* data, int kind) {
  Context* c = context_of(context);
  if (data == nullptr) return 0;
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  if (kind == 0) {
    EPS_GPU_CHECK(gpuFreeHost(data), on_device(c->ordinal));
  } else if (kind == 1) {
    EPS_GPU_CHECK(gpuFree(data), on_device(c->ordinal));
  } else {
    return fail("release: unknown memory kind " + std::to_string(kind) + " (0 pinned host, 1 device)");
  }
  return 0;
}

// ---- Queues: NULL is the context's default stream.
gpuStream_t stream_of(Context* c, void* queue) {
  return queue != nullptr ? static_cast<gpuStream_t>(queue) : c->stream;
}

int queue_create(void* context, void** queue) {
  Context* c = context_of(context);
  *queue = nullptr;
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  gpuStream_t stream = nullptr;
  EPS_GPU_CHECK(gpuStreamCreate(&stream), on_device(c->ordinal));
  *queue = stream;
  return 0;
}

int queue_destroy(void* context, void* queue) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  const auto stream = static_cast<gpuStream_t>(queue);
  const gpuError_t synchronized = gpuStreamSynchronize(stream);
  EPS_GPU_CHECK(gpuStreamDestroy(stream), on_device(c->ordinal));
  EPS_GPU_CHECK(synchronized, " before destroying a stream" + on_device(c->ordinal));
  return 0;
}

// A query that says "not yet" is no failure: *ready 0.
int query_result(gpuError_t error, const char* call, int ordinal, int* ready) {
  *ready = error == gpuSuccess ? 1 : 0;
  if (error == gpuSuccess || error == gpuErrorNotReady) return 0;
  return fail_call(error, call, on_device(ordinal));
}

int queue_query(void* context, void* queue, int* idle) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  return query_result(gpuStreamQuery(stream_of(c, queue)), "gpuStreamQuery", c->ordinal, idle);
}

int copy(void* context, void* queue, void* dst, const void* src, std::size_t bytes) {
  Context* c = context_of(context);
  if (bytes == 0) return 0;
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  EPS_GPU_CHECK(gpuMemcpyAsync(dst, src, bytes, stream_of(c, queue)), of_bytes(bytes, c->ordinal));
  return 0;
}

int fill(void* context, void* queue, void* dst, int value, std::size_t bytes) {
  Context* c = context_of(context);
  if (bytes == 0) return 0;
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  EPS_GPU_CHECK(gpuMemsetAsync(dst, value, bytes, stream_of(c, queue)), of_bytes(bytes, c->ordinal));
  return 0;
}

int launch(void* context, void* queue, int kernel, const void* args, std::size_t args_bytes) {
  Context* c = context_of(context);
  if (kernel < 0 || kernel >= kKernelCount) {
    return fail("launch: kernel id " + std::to_string(kernel) + " is not in [0, " +
                std::to_string(kKernelCount) + ")");
  }
  const KernelEntry& entry = kKernels[kernel];
  if (args_bytes != entry.args_bytes) {
    return fail(std::string("launch of ") + entry.name + ": arguments of " + std::to_string(args_bytes) +
                " bytes, the plugin expects " + std::to_string(entry.args_bytes));
  }
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  return entry.launch(args, stream_of(c, queue), c->ordinal);
}

int write_value(void* context, void* queue, void* address, std::uint64_t value, int width_bytes) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  const std::string failure = gpu_stream_write_value(stream_of(c, queue), address, value, width_bytes);
  if (!failure.empty()) return fail(failure + on_device(c->ordinal));
  return 0;
}

// The wait runs on the GPU, which cannot give up: timeout_seconds is the host's to enforce (queue_query).
int wait_value(void* context, void* queue, const void* address, std::uint64_t value, int width_bytes,
               int condition, double) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  const std::string failure =
      gpu_stream_wait_value(stream_of(c, queue), address, value, width_bytes, condition == 1);
  if (!failure.empty()) return fail(failure + on_device(c->ordinal));
  return 0;
}

// ---- Events.
int event_create(void* context, void** event) {
  Context* c = context_of(context);
  *event = nullptr;
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  gpuEvent_t created = nullptr;
  EPS_GPU_CHECK(gpuEventCreate(&created), on_device(c->ordinal));
  *event = created;
  return 0;
}

int event_destroy(void* context, void* event) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuEventDestroy(static_cast<gpuEvent_t>(event)), on_device(c->ordinal));
  return 0;
}

int event_record(void* context, void* event, void* queue) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  EPS_GPU_CHECK(gpuEventRecord(static_cast<gpuEvent_t>(event), stream_of(c, queue)), on_device(c->ordinal));
  return 0;
}

int event_query(void* context, void* event, int* done) {
  Context* c = context_of(context);
  return query_result(gpuEventQuery(static_cast<gpuEvent_t>(event)), "gpuEventQuery", c->ordinal, done);
}

int queue_wait_event(void* context, void* queue, void* event) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  EPS_GPU_CHECK(gpuStreamWaitEvent(stream_of(c, queue), static_cast<gpuEvent_t>(event), 0),
                on_device(c->ordinal));
  return 0;
}

int event_elapsed_ms(void* context, void* start, void* end, float* milliseconds) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(
      gpuEventElapsedTime(milliseconds, static_cast<gpuEvent_t>(start), static_cast<gpuEvent_t>(end)),
      on_device(c->ordinal));
  return 0;
}

// ---- IPC and host registration.
static_assert(sizeof(gpuIpcMemHandle_t) == EPS_DEVICE_IPC_HANDLE_BYTES);

int ipc_export(void* context, const void* data, void* handle) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  gpuIpcMemHandle_t exported;
  EPS_GPU_CHECK(gpuIpcGetMemHandle(&exported, const_cast<void*>(data)), on_device(c->ordinal));
  std::memcpy(handle, &exported, sizeof exported);
  return 0;
}

int ipc_import(void* context, const void* handle, void** data) {
  Context* c = context_of(context);
  *data = nullptr;
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  gpuIpcMemHandle_t imported;
  std::memcpy(&imported, handle, sizeof imported);
  EPS_GPU_CHECK(gpuIpcOpenMemHandle(data, imported), on_device(c->ordinal));
  return 0;
}

int ipc_close(void* context, void* data) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  EPS_GPU_CHECK(gpuIpcCloseMemHandle(data), on_device(c->ordinal));
  return 0;
}

int host_register(void* context, void* data, std::size_t bytes, void** device_address) {
  Context* c = context_of(context);
  *device_address = nullptr;
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  EPS_GPU_CHECK(gpuHostRegister(data, bytes), of_bytes(bytes, c->ordinal));
  EPS_GPU_CHECK(gpuHostGetDevicePointer(device_address, data, 0), of_bytes(bytes, c->ordinal));
  return 0;
}

int host_unregister(void* context, void* data) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  EPS_GPU_CHECK(gpuHostUnregister(data), on_device(c->ordinal));
  return 0;
}

// ---- Graphs: a stream capture, instantiated at its end.
int capture_begin(void* context, void* queue) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  EPS_GPU_CHECK(gpuStreamBeginCapture(stream_of(c, queue)), on_device(c->ordinal));
  return 0;
}

int capture_end(void* context, void* queue, void** graph) {
  Context* c = context_of(context);
  *graph = nullptr;
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  gpuGraph_t captured = nullptr;
  EPS_GPU_CHECK(gpuStreamEndCapture(stream_of(c, queue), &captured), on_device(c->ordinal));
  gpuGraphExec_t executable = nullptr;
  const gpuError_t instantiated = gpuGraphInstantiate(&executable, captured);
  const gpuError_t destroyed = gpuGraphDestroy(captured);
  EPS_GPU_CHECK(instantiated, on_device(c->ordinal));
  EPS_GPU_CHECK(destroyed, on_device(c->ordinal));
  *graph = executable;
  return 0;
}

int graph_launch(void* context, void* graph, void* queue) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  EPS_GPU_CHECK(gpuGraphLaunch(static_cast<gpuGraphExec_t>(graph), stream_of(c, queue)),
                on_device(c->ordinal));
  return 0;
}

int graph_destroy(void* context, void* graph) {
  Context* c = context_of(context);
  EPS_GPU_CHECK(gpuGraphExecDestroy(static_cast<gpuGraphExec_t>(graph)), on_device(c->ordinal));
  return 0;
}

// ---- The copy ledger. Pageable host memory unknown to the runtime is host memory: the error such a
// pointer may leave behind is cleared, so that it does not surface at the next call.
int pointer_kind(void*, const void* pointer, int* kind) {
  gpuPointerAttributes attributes{};
  const gpuError_t error = gpuPointerGetAttributes(&attributes, pointer);
  if (error != gpuSuccess) {
    (void)gpuGetLastError();
    *kind = 0;
    return 0;
  }
  *kind = gpu_is_device_memory(attributes) ? 1 : 0;
  return 0;
}

const char* last_error() { return last_error_text.c_str(); }

int export_dma_buf(void* context, const void* data, std::size_t bytes, int* fd, std::uint64_t* offset) {
  Context* c = context_of(context);
  *fd = -1;
  *offset = 0;
  EPS_GPU_CHECK(gpuSetDevice(c->ordinal), on_device(c->ordinal));
  const std::string failure = gpu_export_dma_buf(data, bytes, fd, offset);
  if (!failure.empty()) return fail(failure + of_bytes(bytes, c->ordinal));
  return 0;
}

const eps_device_plugin_v3 kPlugin = {
    EPS_DEVICE_PLUGIN_ABI_V3,
    kGpuBackend,
    kKernelCount,
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

// The exported entry (EPS_DEVICE_PLUGIN_SYMBOL_V3). It is declared in a namespace of its own because the
// function shares its name with the struct's typedef at global scope; with C language linkage the symbol is
// plain `eps_device_plugin_v3` wherever it is declared. The only symbol the plugin exports (the rest is
// built with hidden visibility).
namespace eps_device_plugin_export {
extern "C" __attribute__((visibility("default"))) const ::eps_device_plugin_v3* eps_device_plugin_v3(void) {
  return &kPlugin;
}
}  // namespace eps_device_plugin_export
