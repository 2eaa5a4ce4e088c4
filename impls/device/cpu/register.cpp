// Registers the `cpu` and `cpu-isolated` devices (device_registry.hpp); its own object, so that code using
// make_cpu_device alone does not pull in the registry.
#include "impls/device/cpu/cpu_device.hpp"
#include "impls/device/device_registry.hpp"

namespace {

eps::device::DeviceBackend cpu_backend(std::string name, std::string summary, bool isolated) {
  eps::device::CpuDeviceOptions options;
  options.isolated = isolated;
  eps::device::DeviceBackend backend;
  backend.name = std::move(name);
  backend.summary = std::move(summary);
  backend.count = [] { return eps::Result<int>(1); };
  backend.open = [options](int) { return eps::device::make_cpu_device(options); };
  backend.properties = [options](int) -> eps::Result<eps::device::DeviceProperties> {
    EPS_ASSIGN_OR_RETURN(auto device, eps::device::make_cpu_device(options));
    return device->properties();
  };
  backend.host = true;
  return backend;
}

}  // namespace

void eps_register_device_cpu(eps::device::DeviceRegistry& registry) {
  registry.add(cpu_backend("cpu", "kernels on host threads (always available)", false));
  registry.add(cpu_backend("cpu-isolated",
                           "the cpu device with device memory the host may not touch outside device "
                           "operations (docs/devices.md 12.5; always available)",
                           true));
}
