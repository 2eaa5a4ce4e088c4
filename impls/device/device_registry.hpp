// The device registry (docs/devices.md): every backend registered by name (house style rule 2) and the one
// place that turns `--device NAME` into a Device.
//
// A backend folder defines `void eps_register_device_<name>(eps::device::DeviceRegistry&)` and is listed in
// impls/device/CMakeLists.txt; CMake generates the function that calls every registration. Backends: `cpu`
// and `cpu-isolated` (always, host backends) and `cuda`, `hip` (GPU plugins, gpu/). Names: "cpu",
// "cpu-isolated", "cuda", "hip", "cuda:N" / "hip:N" for device ordinal N, and "auto": the first GPU backend
// that has a device here, else `cpu`.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "impls/device/device.hpp"
#include "reference/common/status.hpp"

namespace eps::device {

struct DeviceBackend {
  std::string name;
  std::string summary;
  // Devices of this backend here (>= 1), or kUnavailable with the reason: the plugin or runtime is missing,
  // or the runtime finds no device.
  std::function<Result<int>()> count;
  std::function<Result<std::unique_ptr<Device>>(int ordinal)> open;
  // What `epsuite info` shows of device `ordinal` without opening it (no context, no stream).
  std::function<Result<DeviceProperties>(int ordinal)> properties;
  // A host backend (`cpu`, `cpu-isolated`): one device, no ":N" ordinal, never picked by "auto".
  bool host = false;
};

class DeviceRegistry {
 public:
  void add(DeviceBackend backend);  // a second backend of one name is a programming error
  const DeviceBackend* find(std::string_view name) const;
  std::vector<std::string> names() const;
  const std::vector<DeviceBackend>& backends() const { return backends_; }

 private:
  std::vector<DeviceBackend> backends_;
};

const DeviceRegistry& device_registry();

// `--device` values: "auto" and every registered name.
std::vector<std::string> device_choices();

// Opens the device `spec` names. Without an ordinal, a GPU backend takes device local_rank % count (one GPU
// per rank on a node). Errors: kInvalidArgument for an unknown name or a bad ordinal ("--device: unknown
// device 'x'; choices: auto, cpu, cuda, hip"); kUnavailable when the backend has no device here.
Result<std::unique_ptr<Device>> make_device(std::string_view spec, int local_rank = 0);

}  // namespace eps::device
