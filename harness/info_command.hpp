// `epsuite info`: what this run would execute on (hosts, ranks, MPI library and thread level, build
// options, per-rank device and NIC, platform fingerprint) and, with --preset, the preset resolved for this
// rank count (exit 2 when the preset cannot use it). Printed by rank 0 as a `#` block; --json FILE writes
// the same as JSON (FILE '-' prints only the JSON to stdout).
#pragma once

#include <memory>

#include "harness/params.hpp"

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
};

}  // namespace eps
