#include "impls/runtime/deadline.hpp"

#include <cmath>
#include <thread>

#include <fmt/format.h>

namespace eps {

Deadline::Deadline(double seconds)
    : budget_seconds_(std::isfinite(seconds) && seconds > 0 ? seconds : 0.0),
      at_(Clock::now() +
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget_seconds_))) {}

double Deadline::remaining_seconds() const {
  const std::chrono::duration<double> left = at_ - Clock::now();
  return left.count() > 0 ? left.count() : 0.0;
}

void Backoff::pause() {
  const std::int64_t polls = polls_++;
  if (polls < kSpinPolls) return;
  if (polls < kYieldPolls) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(kSleep);
  }
}

Status wait_until(const Deadline& deadline, const std::function<bool()>& predicate,
                  const std::function<std::string()>& describe) {
  Backoff backoff;
  for (;;) {
    if (predicate()) return Status();
    if (deadline.expired()) {
      return Status(StatusCode::kEnvironment, fmt::format("timed out after {:.3f} s waiting for {}",
                                                          deadline.budget_seconds(), describe()));
    }
    backoff.pause();
  }
}

std::string describe_counter_wait(int peer, int channel, std::uint64_t expected, std::uint64_t observed) {
  return fmt::format("peer {}, channel {}: counter expected {}, observed {}", peer, channel, expected,
                     observed);
}

}  // namespace eps
