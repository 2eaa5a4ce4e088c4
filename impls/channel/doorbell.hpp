// A doorbell that idle proxy threads sleep on and producers ring (docs/channel.md 7.3 "Idle proxy threads"):
// a futex word whose value (the epoch) moves at every ring. A sleeper passes the epoch it read before it
// looked for work, so a ring that came in between ends its sleep at once; every sleep also has a timeout, so
// a producer that cannot ring (a GPU kernel) or a lost wake costs at most that long, never a hang.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

namespace eps::channel {

class Doorbell {
 public:
  std::uint32_t epoch() const { return word_.load(std::memory_order_acquire); }
  bool has_sleepers() const { return sleepers_.load(std::memory_order_seq_cst) > 0; }

  // Sleeps until the epoch differs from `seen` or `timeout` passed; may return early.
  void wait(std::uint32_t seen, std::chrono::microseconds timeout) {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (word_.load(std::memory_order_seq_cst) == seen) {
      const auto us = timeout.count();
      const timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
      syscall(SYS_futex, futex_word(), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
    }
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }

  // Moves the epoch and wakes every sleeper (the system call only when one sleeps).
  void ring() {
    word_.fetch_add(1, std::memory_order_seq_cst);
    if (has_sleepers()) syscall(SYS_futex, futex_word(), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
  }

 private:
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
                "the futex is the atomic's word");
  std::uint32_t* futex_word() { return reinterpret_cast<std::uint32_t*>(&word_); }

  std::atomic<std::uint32_t> word_{0};
  std::atomic<int> sleepers_{0};
};

}  // namespace eps::channel
