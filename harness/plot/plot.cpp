#include "harness/plot/plot.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "results/document.hpp"

extern char** environ;

namespace eps {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kErrorPrefix = "epsuite: error: ";
constexpr int kPythonMissing = 127;

Status check_inputs(const std::vector<std::string>& files) {
  for (const std::string& file : files) {
    EPS_ASSIGN_OR_RETURN(ResultsDocument doc, read_results_file(file));
    if (doc.cases.empty())
      return invalid_argument(file, "results: the document holds no cases; nothing to plot");
  }
  return Status();
}

std::string read_all(int fd) {
  std::string text;
  std::array<char, 4096> buffer{};
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n > 0) {
      text.append(buffer.data(), static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return text;
    }
  }
}

// The script's last stderr line without its "epsuite: error: " prefix: its one message.
std::string script_message(std::string err) {
  while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
  const std::size_t line = err.rfind('\n');
  std::string last = line == std::string::npos ? err : err.substr(line + 1);
  if (last.starts_with(kErrorPrefix)) last.erase(0, kErrorPrefix.size());
  return last;
}

// Runs argv with stderr captured (stdout inherited); returns the exit code and the stderr text.
Result<std::pair<int, std::string>> spawn_captured(const std::vector<std::string>& args) {
  std::array<int, 2> pipe_fds{};
  if (::pipe(pipe_fds.data()) != 0)
    return Status(StatusCode::kEnvironment, "pipe() failed for the plot script");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    return Status(StatusCode::kEnvironment,
                  fmt::format("plot: cannot run {}: {} (ci/setup installs python3 and python3-matplotlib)",
                              args[0], std::strerror(spawned)));
  }
  std::string err = read_all(pipe_fds[0]);
  ::close(pipe_fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return std::pair<int, std::string>(code, std::move(err));
}

}  // namespace

Result<std::string> plot_script_path() { return helper_script_path("epsuite_plot.py"); }

Result<std::string> helper_script_path(const std::string& name) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    return Status(StatusCode::kEnvironment, "plot: cannot locate the epsuite executable (/proc/self/exe)");
  // Next to the executable in a build folder; under share/epsuite/ of an installed prefix.
  const fs::path script = exe.parent_path() / "plot" / name;
  const fs::path installed = exe.parent_path().parent_path() / "share" / "epsuite" / "plot" / name;
  if (fs::is_regular_file(script, ec)) return script.string();
  if (fs::is_regular_file(installed, ec)) return installed.string();
  return Status(StatusCode::kEnvironment,
                fmt::format("plot: the plot script {} is missing; rebuild epsuite", script.string()));
}

Status plot_results(const std::vector<std::string>& files, const std::string& out_dir) {
  EPS_RETURN_IF_ERROR(check_inputs(files));
  EPS_ASSIGN_OR_RETURN(std::string script, plot_script_path());
  const char* python = std::getenv("EPSUITE_PYTHON");
  std::vector<std::string> args{python != nullptr && *python != '\0' ? python : EPS_PLOT_PYTHON, script,
                                "--out", out_dir};
  args.insert(args.end(), files.begin(), files.end());
  EPS_ASSIGN_OR_RETURN(auto outcome, spawn_captured(args));
  const auto& [code, err] = outcome;
  if (code == 0) return Status();
  // The script exits 2 for bad input and 3 for a missing matplotlib; anything else is a crash.
  if (code == 2) return Status(StatusCode::kInvalidArgument, script_message(err));
  if (code == 3) return Status(StatusCode::kEnvironment, script_message(err));
  if (code == kPythonMissing) {
    return Status(StatusCode::kEnvironment,
                  fmt::format("plot: {} not found (ci/setup installs python3)", args[0]));
  }
  std::fputs(err.c_str(), stderr);
  return Status(StatusCode::kEnvironment,
                fmt::format("plot: {} exited with {}: {}", script, code, script_message(err)));
}

Status write_run_report(const std::string& run_dir) {
  EPS_ASSIGN_OR_RETURN(std::string script, helper_script_path("epsuite_report.py"));
  const char* python = std::getenv("EPSUITE_PYTHON");
  EPS_ASSIGN_OR_RETURN(
      auto outcome,
      spawn_captured({python != nullptr && *python != '\0' ? python : EPS_PLOT_PYTHON, script, run_dir}));
  const auto& [code, err] = outcome;
  if (code == 0) return Status();
  std::fputs(err.c_str(), stderr);
  return Status(code == 2 ? StatusCode::kInvalidArgument : StatusCode::kEnvironment,
                fmt::format("report: {} exited with {}: {}", script, code, script_message(err)));
}

}  // namespace eps
