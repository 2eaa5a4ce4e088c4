// `epsuite bench OP`: the command line of the bench driver (perf/bench/driver.hpp). Under mpirun every rank
// parses the same flags; the op is the first positional argument, one of the registered bench ops.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "impls/runtime/params.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace eps {

class BenchCommand {
 public:
  BenchCommand();
  void bind(CLI::App& app);
  // After parsing: initializes MPI, discovers the platform, runs the op, finalizes; returns the exit code
  // agreed over ranks.
  int run(const std::vector<std::string>& argv);

 private:
  std::unique_ptr<Params> params_;
  std::string op_;
  std::vector<std::string> tags_;
};

}  // namespace eps
