// The fabric registry: every backend registered by name (docs/architecture.md, house style rule 2), and the
// one place that turns `--fabric NAME` plus `--chaos SPEC` into a Fabric.
//
// A backend folder (impls/fabric/<family>/) defines `void eps_register_fabric_<family>(
// eps::fabric::FabricRegistry&)` and declares itself in impls/fabric/CMakeLists.txt with
// `eps_add_fabric(<family> SOURCES ...)`; CMake generates the function that calls every registration.
// One entry registers a family and its variants: "shm" (no variant), "libfabric" with "shm", "tcp",
// "efa", "verbs" (names "libfabric:shm", ...), "verbs" with "rc" and "efa" ("verbs:rc", "verbs:efa").
//
// `make_fabric` is collective over config.comm. Errors: kInvalidArgument for an unknown name ("--fabric:
// unknown fabric 'x'; registered: shm, libfabric:shm, ...") or a bad --chaos spec; kEnvironment when the
// fabric exists but cannot run here (no provider, no RDMA device), with a message that says why, so that
// callers can skip it ("libfabric:efa: provider efa not available (fi_getinfo: No data available)").
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "impls/fabric/fabric.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "reference/common/status.hpp"

namespace eps::device {
class Device;
}  // namespace eps::device

namespace eps::fabric {

struct FabricConfig;
using FabricFactory = std::function<Result<std::unique_ptr<Fabric>>(const FabricConfig& config)>;

struct FabricConfig {
  MPI_Comm comm = MPI_COMM_WORLD;  // the factory duplicates it
  std::string name;                // full name, "libfabric:tcp"
  std::string variant;             // "tcp" ("" for a family without variants)
  double timeout_seconds = 60.0;   // every wait during setup (docs/errors.md 10)
  std::string iface;               // --iface: the network interface of socket fabrics (libfabric:tcp)
  // Creates another registered fabric by name (make_plain_fabric): how a composite (auto) makes its parts
  // without linking the registry that links it.
  FabricFactory make_other = {};
  // Where allocate() places regions: null = host memory; else this device's kDevice memory, registered with
  // the NIC where the backend can (libfabric FI_HMEM, verbs dma-buf) and host memory otherwise, as
  // Fabric::memory_registration() says. Backends that cannot use it (shm) ignore it and report "none".
  device::Device* memory_device = nullptr;
  // --allow-fallback: `auto` refuses a present but failing RDMA candidate and goes on (docs/fabrics.md 6.6).
  bool allow_fallback = false;
};

struct FabricEntry {
  std::string family;
  std::vector<std::string> variants;  // empty: the family name alone
  std::string summary;
  FabricFactory factory;
  // Variants that never keep put order, whatever the provider reports (EFA SRD): fabric-order signalling
  // on them is refused before anything is created (fabric_selection.hpp).
  std::vector<std::string> unordered_variants = {};
  // Loads the libraries the backend opens at run time (libfabric, libibverbs); empty when it has none.
  std::function<Status()> load_libraries = {};
};

class FabricRegistry {
 public:
  // A second registration of a family is a programming error (std::logic_error).
  void add(FabricEntry entry);
  // Every full name ("shm", "libfabric:shm", ...), in registration order.
  std::vector<std::string> names() const;
  const std::vector<FabricEntry>& entries() const { return entries_; }
  // The entry and variant of a full name; nullptr when unknown.
  const FabricEntry* find(std::string_view name, std::string* variant) const;
  // True when `name` is registered and known to be unordered (a variant listed in unordered_variants).
  bool known_unordered(std::string_view name) const;

 private:
  std::vector<FabricEntry> entries_;
};

const FabricRegistry& fabric_registry();

// Runs every backend's load_libraries, ignoring failures (making the fabric reports them). MPI commands
// call it before MPI_Init: Open MPI's MPI_Init opens its psm/psm2 components, which load
// libpsm_infinipath (its constructor sleeps ~200 ms) and unload it again when not selected, so loading
// libfabric after MPI_Init (a libfabric fabric, the platform probe) would run that constructor a second
// time. Loaded first, libfabric keeps libpsm_infinipath resident and the process pays it once, as when
// epsuite linked libfabric. Commands without MPI never call this and load no fabric library.
void load_fabric_libraries();

// Creates fabric `name`, wrapped in the chaos decorator when `chaos` is not empty (its --chaos spec,
// impls/fabric/chaos/chaos_fabric.hpp). Collective over comm.
Result<std::unique_ptr<Fabric>> make_fabric(std::string_view name, MPI_Comm comm, double timeout_seconds,
                                            std::string_view chaos = {});
// The same for a user's selection: its fabric, chaos spec and interface (--fabric, --chaos, --iface), failing
// closed (--allow-fallback) and refused unless the chosen fabric is --require-fabric (check_required_fabric).
Result<std::unique_ptr<Fabric>> make_fabric(const FabricSelection& selection, MPI_Comm comm,
                                            double timeout_seconds);

// --require-fabric (docs/fabrics.md 6.6): ok when selection.require_fabric is empty or is choice.chosen;
// otherwise kEnvironment (exit 3) naming the fabric chosen instead and why (the --fabric that named it, the
// one-node layout, or auto's refusals and candidate order).
Status check_required_fabric(const FabricSelection& selection, const FabricChoice& choice);

// The preflight of `epsuite info` and of every command's results (docs/fabrics.md 6.6): which fabric a
// selection really uses and what `auto` refused. For `auto` the fabric is created (collective over comm, no
// chaos decorator) and dropped again; a named fabric is taken at its word and created by whoever uses it.
// Errors: those of make_fabric (fail closed, --require-fabric not met).
Result<FabricPreflight> preflight_fabric(const FabricSelection& selection, MPI_Comm comm,
                                         double timeout_seconds);
// "auto -> libfabric:tcp (refused: verbs:rc: rank 0: no RDMA device ...; ...)" for headers.
std::string describe_preflight(const FabricPreflight& preflight);
// The fabric's name without decorators ("chaos(shm)" -> "shm", "auto(shm+libfabric:tcp)" stays): what
// results record as the "fabric" identity, next to "chaos".
std::string undecorated_name(const Fabric& fabric);
// Creates `config.name` (no chaos): how a composite fabric (auto) makes its parts.
Result<std::unique_ptr<Fabric>> make_plain_fabric(FabricConfig config);

}  // namespace eps::fabric
