// The conformance suite as a command: what `epsuite check` and the ctest conformance executables run.
//
// Selection. --device picks where the transports' buffers live and their data path runs (docs/devices.md);
// every case runs on it through host mirrors (impls/problem/device_mirror.hpp). --transport picks the
// transports the transport suites instantiate cases for ('all' = every registered one); --fabric, --signal,
// --chaos and --allow-unsafe form the FabricSelection that fabric-based transports are created with
// (impls/fabric/fabric_selection.hpp). A transport or fabric named on the command line is *selected*: under
// --strict its unavailability fails the run; one reached through 'all' or a default is only reported
// (docs/errors.md 10.1).
//
// Preflight (collective, before any test): the selection is validated without creating anything (bad input
// exits 2), the fabric preflight runs (docs/fabrics.md 6.6: `auto` fails closed, --require-fabric must be
// met, exit 3 otherwise), then every selected transport is created once at a small shape. A transport whose
// fabric is absent here is `unavailable` (its cases skip with the reason); a timeout or peer failure is an
// error (exit 3), never a skip. Rank 0 then prints one capability table: transport x contract, each cell the
// contract's outcome in this run (`run`, `n/a` for a contract the transport does not declare, `unavailable`).
// Cases of undeclared contracts are not instantiated; one test per transport shows that dispatching an
// undeclared layout is refused (kInvalidArgument).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "impls/device/device.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "impls/runtime/params.hpp"
#include "impls/transport/registry.hpp"
#include "reference/common/status.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace eps::conformance {

// --transport of this run, validated against the registry ("all" until set).
const std::vector<std::string>& selected_transports();
// Whether `name` was named on the command line (not reached through 'all').
bool transport_named(const std::string& name);
void set_selected_transports(std::vector<std::string> names, bool named);

const fabric::FabricSelection& fabric_selection();
// Whether --fabric (or its environment twin) was given rather than defaulted.
bool fabric_named();
void set_fabric_selection(fabric::FabricSelection selection, bool named);

// --repeat-check (docs/results.md 9.8): the transport contract cases run a second time on identical inputs
// and compare the outputs with the first run's bit for bit.
bool repeat_check();
void set_repeat_check(bool enabled);

// The device of this run (--device), opened by SuiteCommand::run: the device, or why it is unavailable.
Result<device::Device*> selected_device();
// Whether --device was given rather than defaulted.
bool device_named();
// Opens the device `spec` names for this rank (collective: the node-local rank picks the GPU).
Status open_device(const std::string& spec, bool named, double timeout_seconds);

// The preflight outcome of a selected transport: its creation status at a small shape (ok, kUnavailable).
const Status& transport_availability(const std::string& name);

// Validates the selection, runs the fabric preflight and creates every selected transport once (see
// above). kInvalidArgument for a bad selection, kEnvironment for a timeout or peer failure while creating,
// a fabric that fails closed or an unmet --require-fabric. Collective.
Status preflight_transports(double timeout_seconds);

// The fabric preflight line and the capability table (transport x contract) of the selected transports
// after the preflight, '#' lines.
std::string capability_table();

class SuiteCommand {
 public:
  SuiteCommand();
  // Adds --strict, --timeout, the selection flags and the acceptance of --gtest_* flags to `app`.
  void bind(CLI::App& app);
  // After `app` parsed: initializes MPI, resolves the parameters, preflights, prints the `#` header on
  // rank 0, runs the suite and returns the exit code agreed over ranks (MPI finalized).
  int run(CLI::App& app);

 private:
  std::unique_ptr<Params> params_;
};

}  // namespace eps::conformance
