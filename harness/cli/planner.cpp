#include "harness/cli/planner.hpp"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "impls/layer/planner/planner.hpp"

namespace eps {
namespace {

// The server the signal handler stops; request_stop() is async-signal-safe (planner.hpp).
std::atomic<planner::PlannerServer*> g_serving{nullptr};

extern "C" void stop_planner_on_signal(int) {
  if (planner::PlannerServer* server = g_serving.load()) server->request_stop();
}

Status install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = stop_planner_on_signal;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM}) {
    if (::sigaction(signal, &action, nullptr) != 0) {
      return Status(StatusCode::kEnvironment, fmt::format("planner: sigaction({}) failed", signal));
    }
  }
  return Status();
}

// Log lines go to --log FILE (appended, flushed per line) or to stderr.
struct LogFileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using LogFile = std::unique_ptr<std::FILE, LogFileCloser>;

Result<LogFile> open_log(const std::string& path) {
  if (path.empty()) return LogFile();
  LogFile file(std::fopen(path.c_str(), "a"));
  if (!file) return invalid_argument("--log", "cannot append to '{}': {}", path, std::strerror(errno));
  return file;
}

Status serve(const std::string& listen, double reply_delay_seconds, const std::string& log_path) {
  // The key first: without it nothing else happens (docs/eplb.md 8.7). Its errors name the variable only.
  EPS_ASSIGN_OR_RETURN(planner::PlannerKey key, planner::PlannerKey::from_environment());
  EPS_ASSIGN_OR_RETURN(auto address, planner::parse_address("--listen", listen, /*min_port=*/0));
  EPS_ASSIGN_OR_RETURN(LogFile log_file, open_log(log_path));
  planner::PlannerOptions options;
  options.host = address.first;
  options.port = address.second;
  options.reply_delay_seconds = reply_delay_seconds;
  std::FILE* log_sink = log_file ? log_file.get() : stderr;
  options.on_log = [log_sink](const std::string& line) {
    std::fprintf(log_sink, "%s\n", line.c_str());
    std::fflush(log_sink);
  };
  EPS_ASSIGN_OR_RETURN(auto server, planner::PlannerServer::start(options, std::move(key)));
  g_serving.store(server.get());
  EPS_RETURN_IF_ERROR(install_stop_handlers());
  std::printf("planner: listening on %s (policies: %s)\n",
              planner::format_address(options.host, server->port()).c_str(),
              fmt::format("{}", fmt::join(eplb::eplb_policy_names(), ", ")).c_str());
  std::fflush(stdout);
  server->wait();
  g_serving.store(nullptr);
  const planner::PlannerStats stats = server->stats();
  std::fprintf(log_sink,
               "planner: stopped after %lld connections, %lld plans, %lld switches, %lld rejected\n",
               static_cast<long long>(stats.connections), static_cast<long long>(stats.plans),
               static_cast<long long>(stats.switches), static_cast<long long>(stats.rejected));
  std::fflush(log_sink);
  return server->serve_status();
}

}  // namespace

void PlannerCommand::bind(CLI::App& app) {
  app.add_option("--listen", listen_, "HOST:PORT to listen on (PORT 0: an ephemeral port, printed)")
      ->required();
  app.add_option("--reply-delay", reply_delay_seconds_,
                 "Answer each plan only this many seconds after it arrived")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--log", log_path_, "Append the log (rejected connections) to FILE instead of stderr");
  app.footer(
      "The shared key comes from EPSUITE_EPLB_KEY (at least 32 bytes as hex, or @FILE holding the hex); "
      "without it the planner does not start (exit 2). Serves until SIGINT or SIGTERM (exit 0); exit 3 when "
      "it cannot listen (docs/eplb.md 8.7).");
}

int PlannerCommand::run() const {
  const Status status = serve(listen_, reply_delay_seconds_, log_path_);
  if (!status.ok()) {
    std::fprintf(stderr, "epsuite: error: %s\n", status.message().c_str());
    return status.exit_code();
  }
  return 0;
}

}  // namespace eps
