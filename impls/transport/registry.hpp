// The transport registry: every backend registered by name (docs/architecture.md, house style rule 2).
//
// A backend folder (impls/transport/<name>/) defines `void eps_register_transport_<name>(
// eps::transport::TransportRegistry&)` and declares itself in impls/transport/CMakeLists.txt with
// `eps_add_transport(<name> SOURCES ...)`; CMake generates the one function that calls every registration,
// so adding a backend touches no switch and no list in C++. Registration happens on first use of
// `transport_registry()`, in the order the backends were declared.
//
// `select_transports(text)` turns the `--transport` value into names: "all" = every registered backend,
// else a comma-separated list of registered names (each at most once). An unknown name is
// kInvalidArgument listing the valid ones: "--transport: unknown transport 'x'; registered: mpi".
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "impls/fabric/fabric_selection.hpp"
#include "impls/transport/transport.hpp"
#include "reference/common/status.hpp"

namespace eps::transport {

// Creates a transport; collective over config.comm. Transports that move data over a fabric (direct,
// proxy) read `fabric`; the others ignore it.
using TransportFactory = std::function<Result<std::unique_ptr<Transport>>(
    const TransportConfig& config, const fabric::FabricSelection& fabric)>;

struct TransportEntry {
  std::string name;
  std::string summary;
  TransportFactory factory;
  // The contracts the transport declares (the same as its instances' capabilities()), known without
  // creating one: conformance instantiates cases only for declared contracts.
  Capabilities (*capabilities)() = nullptr;
  bool uses_fabric = false;  // reads the FabricSelection
};

class TransportRegistry {
 public:
  // A second registration of the same name is a programming error (std::logic_error).
  void add(TransportEntry entry);
  const std::vector<TransportEntry>& entries() const { return entries_; }
  const TransportEntry* find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<TransportEntry> entries_;
};

// The process-wide registry with every built-in backend registered.
const TransportRegistry& transport_registry();
// Adds a backend that only a test executable defines (a deliberately broken transport that the checks
// must catch). Call it before the first transport_registry() lookup that must see it.
void register_test_transport(TransportEntry entry);

Result<std::vector<std::string>> select_transports(std::string_view text);

// The selection a fabric-based transport is made with: `selection` with memory_device set to config.device
// when the fabric's regions should live in that device's memory and be registered with the NIC as such
// (FabricConfig::memory_device): the caller's buffers are device memory (config.memory kDevice) of a device
// with an FI_HMEM interface whose memory the host addresses, or of a device the host cannot address (a GPU,
// cpu-isolated), whose memory the ipc fabric's regions then use so that `direct` runs GPU-resident
// (docs/devices.md 12.9); fabrics that cannot hold them there keep host memory, and `proxy` drops the device
// (it stages, transport.hpp "Memory").
fabric::FabricSelection with_region_memory(const TransportConfig& config, fabric::FabricSelection selection);

// Creates the registered transport `name` (kInvalidArgument for an unknown name).
Result<std::unique_ptr<Transport>> make_transport(std::string_view name, const TransportConfig& config,
                                                  const fabric::FabricSelection& fabric = {});

}  // namespace eps::transport
