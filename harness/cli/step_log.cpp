#include "harness/cli/step_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "impls/runtime/mpi_runtime.hpp"

namespace eps {

StepLog::StepLog(const std::filesystem::path& path, bool echo) : path_(path), echo_(echo) {
  if (!mpi::is_root()) return;
  std::fflush(stdout);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    status_ = Status(StatusCode::kEnvironment,
                     fmt::format("cannot open log {}: {}", path.string(), std::strerror(errno)));
    return;
  }
  saved_stdout_ = ::dup(STDOUT_FILENO);
  ::dup2(fd, STDOUT_FILENO);
  ::close(fd);
}

StepLog::~StepLog() {
  if (saved_stdout_ < 0) return;
  std::fflush(stdout);
  std::cout.flush();
  ::dup2(saved_stdout_, STDOUT_FILENO);
  ::close(saved_stdout_);
  if (!echo_) return;
  std::ifstream in(path_);
  std::cout << in.rdbuf() << std::flush;
}

}  // namespace eps
