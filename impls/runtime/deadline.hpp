// Deadlines on every wait (docs/errors.md 10).
//
// A `Deadline` is a point on the steady clock fixed when it is made (`Deadline(seconds)` counts from
// now). `wait_until(deadline, predicate, describe)` polls `predicate` until it returns true and returns
// OK, or, once the deadline has passed, returns a kEnvironment status (exit code 3) whose message says
// what was awaited: "timed out after 2.000 s waiting for <describe()>". `describe` is called only on
// expiry, so it can report the state observed at that moment (peer, channel, expected versus observed
// counter; `describe_counter_wait` formats that uniformly). The predicate is always evaluated at least
// once, so an already-true condition succeeds even with an expired deadline.
//
// Polling spins briefly, then yields, then sleeps in short steps: ranks are oversubscribed on small
// machines and a spinning rank would starve the peer it waits for.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "reference/common/status.hpp"

namespace eps {

// The default of `--timeout` / EPSUITE_TIMEOUT (docs/errors.md 10), in seconds.
inline constexpr double kDefaultTimeoutSeconds = 60.0;

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Expires `seconds` from now; `seconds` must be finite and >= 0 (0 = already expired).
  explicit Deadline(double seconds = kDefaultTimeoutSeconds);

  bool expired() const { return Clock::now() >= at_; }
  double budget_seconds() const { return budget_seconds_; }
  double remaining_seconds() const;
  // A fresh deadline with the same budget, counted from now.
  Deadline restarted() const { return Deadline(budget_seconds_); }

 private:
  double budget_seconds_;
  Clock::time_point at_;
};

Status wait_until(const Deadline& deadline, const std::function<bool()>& predicate,
                  const std::function<std::string()>& describe);

// How a polling wait gives way between polls: spin first (low latency while the awaited thread runs), then
// yield, then sleep 50 µs per poll: on an oversubscribed machine the thread waited for may need this core,
// and a yielding thread is always runnable, so it keeps taking turns from it. wait_until uses it; so does
// any wait that polls state other threads advance.
class Backoff {
 public:
  static constexpr int kSpinPolls = 64;
  static constexpr int kYieldPolls = 4096;
  static constexpr std::chrono::microseconds kSleep{50};

  void pause();
  void reset() { polls_ = 0; }
  // Whether the next pause() sleeps: a caller that can be woken early may wait kSleep its own way instead
  // (and call skip()).
  bool sleeping() const { return polls_ >= kYieldPolls; }
  void skip() { ++polls_; }

 private:
  std::int64_t polls_ = 0;
};

// "peer 3, channel 1: counter expected 64, observed 12" (docs/errors.md 10's "what it waited for").
std::string describe_counter_wait(int peer, int channel, std::uint64_t expected, std::uint64_t observed);

}  // namespace eps
