#include "harness/cli/command_start.hpp"

#include <CLI/CLI.hpp>

#include "harness/platform/platform.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/runtime/deadline.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps {

void add_tag_option(CLI::App& app, std::vector<std::string>& tags) {
  app.add_option("--tag", tags,
                 "User tag KEY=VALUE stored under platform.tags of the results (repeatable; not part of the "
                 "fingerprint)");
}

CommandStart start_command(Params& params, const std::vector<std::string>& tag_values) {
  fabric::load_fabric_libraries();  // before MPI_Init: fabric_registry.hpp says why
  const Status initialized = mpi::init(nullptr, nullptr);
  if (!initialized.ok()) mpi::fatal(initialized);
  CommandStart start;
  start.status = params.resolve();
  Result<std::map<std::string, std::string>> tags = parse_tags(tag_values);
  if (start.status.ok() && !tags.ok()) start.status = tags.status();
  if (tags.ok()) start.tags = std::move(tags).value();
  start.timeout_seconds = start.status.ok() ? params.number("timeout") : kDefaultTimeoutSeconds;
  return start;
}

Status record_fabric_preflight(const fabric::FabricSelection& selection, double timeout_seconds,
                               Platform& platform) {
  EPS_RETURN_IF_ERROR(fabric::validate_fabric_selection(selection));
  EPS_ASSIGN_OR_RETURN(fabric::FabricPreflight preflight,
                       fabric::preflight_fabric(selection, MPI_COMM_WORLD, timeout_seconds));
  platform.fabric = std::move(preflight);
  return Status();
}

}  // namespace eps
