// The deadline and the crash report of every call into an EP plugin (docs/errors.md 10, docs/plugins.md).
//
// A hung call inside a plugin cannot be interrupted in-process, and a crash inside one would otherwise end a
// rank without saying where. A PluginCallGuard (RAII, on the calling thread) covers one call:
// - Deadline: a watchdog thread (one per process, started by the first guard) looks every 100 ms at the calls
//   in flight. A call still running `seconds` + kPluginCallGraceSeconds after it started ends the whole job:
//   "epsuite: error on host h, rank r: plugin:x (path): dispatch did not return within 62.0 s (the 60 s
//   deadline plus 2 s; docs/errors.md 10)", exit 3 (mpi::fatal, which MPI_Aborts every rank). The grace
//   leaves a plugin whose own waits end at the deadline the time to return its timeout as an error.
// - Crash: while a guard is armed on a thread, SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT raised on that
//   thread print "epsuite: error on host h, rank r: plugin:x (path) crashed in dispatch: signal 11
//   (SIGSEGV); the job ends with exit 3 (docs/errors.md 10)" and exit the process with 3 (mpirun then ends
//   the other ranks). Outside guards the signal goes on to the disposition it had before (default: a core
//   dump). The handlers are installed by the first guard.
// Arming and disarming are a few atomic stores (no lock, no system call), so the guard costs nothing
// measurable next to a dispatch.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace eps::transport {

namespace detail {
struct PluginCallSlot;  // one per thread that called a plugin (call_guard.cpp)
}  // namespace detail

inline constexpr double kPluginCallGraceSeconds = 2.0;

// What a guard reports about one kind of call; made once per transport and call (the texts are formatted up
// front: the signal handler may only write them).
class PluginCallSite {
 public:
  // `who` names the plugin ("plugin:x (path)"), `call` the entry ("dispatch"); `seconds` is the deadline.
  PluginCallSite(std::string who, std::string call, double seconds);
  const std::string& who() const { return who_; }
  const std::string& call() const { return call_; }
  double seconds() const { return seconds_; }
  // "epsuite: error on host h, rank r: <who> crashed in <call>: signal " (the handler appends the rest).
  const std::string& crash_text() const { return crash_text_; }

 private:
  std::string who_;
  std::string call_;
  double seconds_;
  std::string crash_text_;
};

class PluginCallGuard {
 public:
  explicit PluginCallGuard(const PluginCallSite& site);
  ~PluginCallGuard();
  PluginCallGuard(const PluginCallGuard&) = delete;
  PluginCallGuard& operator=(const PluginCallGuard&) = delete;

 private:
  detail::PluginCallSlot* slot_;
  const PluginCallSite* previous_site_;
  std::int64_t previous_deadline_;
};

}  // namespace eps::transport
