// `epsuite planner --listen HOST:PORT [--reply-delay SECONDS] [--log FILE]`: the EPLB planner as a separate
// process (docs/eplb.md 8.7, impls/layer/planner/planner.hpp), without MPI. It refuses to start without
// EPSUITE_EPLB_KEY (exit 2, naming the variable, never its value), prints one line
// "planner: listening on HOST:PORT (policies: ...)" with the port actually bound (so --listen HOST:0 tells
// its ephemeral port), logs every rejected connection to stderr or --log FILE and serves until SIGINT or
// SIGTERM (exit 0). A failure to listen or of the serving loop exits 3.
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace eps {

class PlannerCommand {
 public:
  void bind(CLI::App& app);
  int run() const;

 private:
  std::string listen_;
  double reply_delay_seconds_ = 0;
  std::string log_path_;
};

}  // namespace eps
