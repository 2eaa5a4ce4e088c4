// The log file of one step of `epsuite run` (harness/cli/run.hpp): while a StepLog lives, rank 0's stdout
// (GoogleTest's printer, bench tables, the plot script) goes to DIR/logs/<step>.log instead of the terminal;
// problems still reach stderr in full. With `echo` (--verbose) the log is printed after the step.
#pragma once

#include <filesystem>
#include <string>

#include "reference/common/status.hpp"

namespace eps {

class StepLog {
 public:
  // On rank 0 only; on the other ranks (which print nothing) it does nothing.
  StepLog(const std::filesystem::path& path, bool echo);
  StepLog(const StepLog&) = delete;
  StepLog& operator=(const StepLog&) = delete;
  // Restores stdout, then echoes the log when asked.
  ~StepLog();

  const std::filesystem::path& path() const { return path_; }
  // The first problem opening the log (stdout stays the terminal then).
  const Status& status() const { return status_; }

 private:
  std::filesystem::path path_;
  bool echo_;
  int saved_stdout_ = -1;
  Status status_;
};

}  // namespace eps
