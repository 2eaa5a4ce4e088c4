// Registers the GPU backends `cuda` and `hip` (docs/devices.md): both are plugins loaded at run time
// (plugin_device.hpp), registered whether or not this build made them, so that a missing plugin or GPU is
// reported as unavailable with its reason instead of as an unknown device. EPS_{CUDA,HIP}_TARGETS (from
// impls/device/gpu/CMakeLists.txt) name the architectures the plugins are built for.
#include "impls/device/device_registry.hpp"
#include "impls/device/gpu/plugin_device.hpp"

#ifndef EPS_CUDA_TARGETS
#define EPS_CUDA_TARGETS sm_90
#endif
#ifndef EPS_HIP_TARGETS
#define EPS_HIP_TARGETS gfx90a
#endif
#define EPS_GPU_TEXT(...) EPS_GPU_TEXT_INNER(__VA_ARGS__)
#define EPS_GPU_TEXT_INNER(...) #__VA_ARGS__

namespace {

eps::device::DeviceBackend plugin_backend(std::string name, std::string summary) {
  eps::device::DeviceBackend backend;
  backend.name = name;
  backend.summary = std::move(summary);
  backend.count = [name] { return eps::device::plugin_device_count(name); };
  backend.open = [name](int ordinal) { return eps::device::open_plugin_device(name, ordinal); };
  backend.properties = [name](int ordinal) { return eps::device::plugin_device_properties(name, ordinal); };
  return backend;
}

}  // namespace

void eps_register_device_gpu(eps::device::DeviceRegistry& registry) {
  registry.add(plugin_backend(
      "cuda",
      "NVIDIA GPUs through the CUDA plugin libeps_device_cuda.so (" EPS_GPU_TEXT(EPS_CUDA_TARGETS) ")"));
  registry.add(plugin_backend(
      "hip", "AMD GPUs through the HIP plugin libeps_device_hip.so (" EPS_GPU_TEXT(EPS_HIP_TARGETS) ")"));
}
