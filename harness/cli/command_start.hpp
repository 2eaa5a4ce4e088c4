// The start shared by every MPI subcommand (info, bench, run): load the fabric libraries and initialize MPI
// (in that order: impls/fabric/fabric_registry.hpp load_fabric_libraries says why), resolve the parameters
// (flag > EPSUITE_* twin > default) and the --tag values. A bad flag or tag is returned, not thrown, so
// that the caller can add its own checks and then agree on one exit code over ranks (docs/errors.md 10).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "impls/fabric/fabric_selection.hpp"
#include "impls/runtime/params.hpp"
#include "reference/common/status.hpp"

namespace CLI {
class App;
}

namespace eps {

struct Platform;

struct CommandStart {
  Status status;                            // the first bad flag or tag, ok otherwise
  double timeout_seconds = 0;               // --timeout, or the default when the flags are bad
  std::map<std::string, std::string> tags;  // parsed --tag values (empty when status failed on them)
};

// The repeatable --tag KEY=VALUE option of the MPI subcommands, collected into `tags` for start_command.
void add_tag_option(CLI::App& app, std::vector<std::string>& tags);

// MPI initialization failures end the job (mpi::fatal, exit 3). `params` must define "timeout".
CommandStart start_command(Params& params, const std::vector<std::string>& tag_values);

// The fabric preflight (docs/fabrics.md 6.6) shared by info, bench and run: validates `selection` (exit 2),
// runs fabric::preflight_fabric (collective; exit 3 when auto fails closed or --require-fabric is not met),
// and records it in platform.fabric (results and info.json carry it). Returns this rank's status;
// the caller agrees on the exit code.
Status record_fabric_preflight(const fabric::FabricSelection& selection, double timeout_seconds,
                               Platform& platform);

}  // namespace eps
