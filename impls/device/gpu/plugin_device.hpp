// The `cuda` and `hip` devices (docs/devices.md): a Device over a GPU plugin (device_plugin.h) that is
// loaded at run time, so that epsuite links no GPU runtime and one binary runs with or without a GPU.
//
// Loading: libeps_device_<backend>.so is looked for in the directory of the running executable
// (/proc/self/exe; the build puts the plugins next to the executables), then by its name through the
// dynamic loader's search path (LD_LIBRARY_PATH, the cache). When the environment variable
// EPS_DEVICE_PLUGIN_DIR is set and not empty, that directory is the only place looked in. A plugin is loaded
// once per process and never unloaded; a failed load is remembered and reported each time.
//
// Versions (device_plugin.h, NCCL style): the loader takes the newest entry symbol the plugin exports:
// eps_device_plugin_v3 (the whole Device interface), else eps_device_plugin_v2 or, from plugins built
// before the headers were split, eps_device_plugin_v1 (ABI 2: the synchronous subset; create_queue,
// create_event, elapsed_seconds, the stream memory operations, IPC, host registration and graphs are then
// kUnavailable naming the plugin and its version, and the copy ledger counts copies to and from this
// device's own allocations only). The table must carry the version of its symbol, name the backend it was
// asked for, fill every entry and have been built with this build's KernelId::kCount kernels; otherwise the
// backend is unavailable with a message saying so ("rebuild the plugin").
//
// Errors: kUnavailable when the backend cannot run here ("cuda: libeps_device_cuda.so cannot be loaded:
// ...", "cuda: no CUDA device (cudaGetDeviceCount: ...)"); kInvalidArgument for a bad ordinal, zero bytes
// or a kernel argument struct of the wrong size; kEnvironment for a failed runtime call, with the plugin's
// message naming the call, the bytes and the device ("cuda:0: allocate 1073741824 bytes of device memory:
// cudaMalloc of 1073741824 bytes on device 0: out of memory (cudaErrorMemoryAllocation)").
#pragma once

#include <memory>
#include <string_view>

#include "impls/device/device.hpp"
#include "reference/common/status.hpp"

namespace eps::device {

// The number of devices of `backend` ("cuda", "hip") here: >= 1, or kUnavailable with the reason (the
// plugin cannot be loaded, the runtime fails or finds no device).
Result<int> plugin_device_count(std::string_view backend);

// What the plugin reports of device `ordinal` without opening it (errors as open_plugin_device).
Result<DeviceProperties> plugin_device_properties(std::string_view backend, int ordinal);

// Opens device `ordinal` of `backend`: kInvalidArgument when ordinal is not in [0, count).
Result<std::unique_ptr<Device>> open_plugin_device(std::string_view backend, int ordinal);

}  // namespace eps::device
