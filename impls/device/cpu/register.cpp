// Registers the `cpu` device (device_registry.hpp); its own object, so that code using make_cpu_device alone
// does not pull in the registry.
#include "impls/device/cpu/cpu_device.hpp"
#include "impls/device/device_registry.hpp"

void eps_register_device_cpu(eps::device::DeviceRegistry& registry) {
  registry.add({"cpu", "kernels on host threads (always available)", [] { return eps::Result<int>(1); },
                [](int) { return eps::device::make_cpu_device(); },
                [](int) -> eps::Result<eps::device::DeviceProperties> {
                  EPS_ASSIGN_OR_RETURN(auto device, eps::device::make_cpu_device());
                  return device->properties();
                }});
}
