// The transport registry: every backend registered by name (docs/architecture.md, house style rule 2).
//
// A backend folder (impls/transport/<name>/) defines `void eps_register_transport_<name>(
// eps::transport::TransportRegistry&)` and declares itself in impls/transport/CMakeLists.txt with
// `eps_add_transport(<name> SOURCES ...)`; CMake generates the one function that calls every registration,
// so adding a backend touches no switch and no list in C++. Registration happens on first use of
// `transport_registry()`, in the order the backends were declared.
//
// `select_transports(text)` turns the `--transport` value into names: a comma-separated list of registered
// names (each at most once), where "all" stands for every built-in backend. An unknown name is
// kInvalidArgument listing the valid ones: "--transport: unknown transport 'x'; registered: mpi".
//
// Transports made on first use: a name "<prefix>:<text>" goes to the resolver registered for `prefix`
// (`plugin:NAME|PATH`, impls/transport/plugin/), which loads the backend and returns its entry; the entry is
// registered under its own name (a plugin named by path registers as "plugin:<its name>") and that name is
// what select_transports returns. Resolving the same text again returns the same entry. Entries are never
// removed, so pointers from find() stay valid.
#pragma once

#include <deque>
#include <functional>
#include <map>
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
  std::function<Capabilities()> capabilities;
  bool uses_fabric = false;  // reads the FabricSelection
};

// Makes the entry of the transport "<prefix>:<text>" from `text` (see above); errors are kInvalidArgument
// naming what is wrong.
using TransportResolver = std::function<Result<TransportEntry>(std::string_view text)>;

class TransportRegistry {
 public:
  // A second registration of the same name is a programming error (std::logic_error).
  void add(TransportEntry entry);
  // A second resolver of the same prefix is a programming error (std::logic_error).
  void add_resolver(std::string prefix, TransportResolver resolver);
  const std::deque<TransportEntry>& entries() const { return entries_; }
  const TransportEntry* find(std::string_view name) const;
  // Every registered name, resolved ones included.
  std::vector<std::string> names() const;
  // The built-in backends ("all").
  std::vector<std::string> builtin_names() const;
  // The registered name `name` stands for: itself when registered, else the entry its resolver makes
  // (registered now). kInvalidArgument for an unknown name or a resolver's error.
  Result<std::string> resolve(std::string_view name);

 private:
  std::deque<TransportEntry> entries_;
  std::vector<bool> resolved_;  // per entry: made by a resolver (not in "all")
  std::map<std::string, TransportResolver, std::less<>> resolvers_;
  std::map<std::string, std::string, std::less<>> aliases_;  // resolved text -> registered name
};

// The process-wide registry with every built-in backend registered.
const TransportRegistry& transport_registry();
// Adds a backend that only a test executable defines (a deliberately broken transport that the checks
// must catch). Call it before the first transport_registry() lookup that must see it.
void register_test_transport(TransportEntry entry);

Result<std::vector<std::string>> select_transports(std::string_view text);
// TransportRegistry::resolve on the process-wide registry.
Result<std::string> resolve_transport(std::string_view name);

// The selection a fabric-based transport is made with: `selection` with memory_device set to config.device
// when the fabric's regions should live in that device's memory and be registered with the NIC as such
// (FabricConfig::memory_device): the caller's buffers are device memory (config.memory kDevice) of a device
// with an FI_HMEM interface whose memory the host addresses, because the data path of the fabric-based
// transports (pack, unpack, signals) runs on the host. A GPU's memory is not handed to the fabric: those
// transports stage it through host memory (transport.hpp "Memory").
fabric::FabricSelection with_region_memory(const TransportConfig& config, fabric::FabricSelection selection);

// Creates the transport `name` (resolved first, see above; kInvalidArgument for an unknown name).
Result<std::unique_ptr<Transport>> make_transport(std::string_view name, const TransportConfig& config,
                                                  const fabric::FabricSelection& fabric = {});

}  // namespace eps::transport
