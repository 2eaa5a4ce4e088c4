// `epsuite plot FILE... --out DIR`: the command line of harness/plot/plot.hpp. No MPI: a plain process.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace eps {

class PlotCommand {
 public:
  void bind(CLI::App& app);
  // After parsing: draws; prints "epsuite: error: ..." on failure and returns the docs/errors.md 10 exit
  // code.
  int run() const;

 private:
  std::vector<std::string> files_;
  std::string out_;
};

}  // namespace eps
