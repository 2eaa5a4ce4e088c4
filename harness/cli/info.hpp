// `epsuite info`: what this run would execute on (hosts, ranks, MPI library and thread level, build
// options, per-rank device and NIC, the node's CPU, memory, hwloc topology, GPUs, verbs devices and
// libfabric providers, library versions, user tags (--tag key=value, repeatable; not part of the
// fingerprint), platform fingerprint) and, with --preset, the preset resolved for this
// rank count (exit 2 when the preset cannot use it). Printed by rank 0 as a `#` block; --json FILE writes
// the same as JSON (FILE '-' prints only the JSON to stdout).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "impls/runtime/params.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace eps {

class InfoCommand {
 public:
  InfoCommand();
  void bind(CLI::App& app);
  // After parsing: initializes MPI, prints, finalizes; returns the exit code agreed over ranks.
  int run();

 private:
  std::unique_ptr<Params> params_;
  std::vector<std::string> tags_;
};

}  // namespace eps
