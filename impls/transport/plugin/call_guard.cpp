#include "impls/transport/plugin/call_guard.hpp"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "impls/runtime/mpi_runtime.hpp"

namespace eps::transport {
namespace detail {

struct PluginCallSlot {
  std::atomic<std::int64_t> deadline_ns{0};  // steady clock; 0 = no call in flight
  std::atomic<const PluginCallSite*> site{nullptr};
};

}  // namespace detail

namespace {

using detail::PluginCallSlot;

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr std::size_t kNumSignals = sizeof(kSignals) / sizeof(kSignals[0]);
struct sigaction g_previous[kNumSignals];

thread_local PluginCallSlot* t_slot = nullptr;

// CLOCK_MONOTONIC_COARSE: a few ns per read instead of a full clock read, and its millisecond resolution is
// plenty for deadlines of seconds.
std::int64_t now_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
  }
  return "?";
}

// Async-signal-safe from here to on_crash: write(2) and _exit only.
void write_text(const char* text, std::size_t bytes) {
  while (bytes > 0) {
    const ssize_t written = ::write(STDERR_FILENO, text, bytes);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text += written;
    bytes -= static_cast<std::size_t>(written);
  }
}

void write_text(const char* text) { write_text(text, std::strlen(text)); }

void on_crash(int sig) {
  const PluginCallSlot* slot = t_slot;
  const PluginCallSite* site = slot != nullptr && slot->deadline_ns.load() != 0 ? slot->site.load() : nullptr;
  if (site == nullptr) {  // not in a plugin call: the signal goes on as before
    for (std::size_t i = 0; i < kNumSignals; ++i) {
      if (kSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
    }
    raise(sig);
    return;
  }
  write_text(site->crash_text().data(), site->crash_text().size());
  char digits[12];
  int n = 0;
  for (int v = sig; v > 0 && n < 11; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  while (n > 0) write_text(&digits[--n], 1);
  write_text(" (");
  write_text(signal_name(sig));
  write_text("); the job ends with exit 3 (docs/errors.md 10)\n");
  _exit(3);
}

void install_crash_handlers() {
  struct sigaction action {};
  action.sa_handler = on_crash;
  sigemptyset(&action.sa_mask);
  for (std::size_t i = 0; i < kNumSignals; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

// The watchdog thread and the slots it watches. Never destroyed: the thread runs until the process ends.
class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog* watchdog = new Watchdog();
    return *watchdog;
  }

  PluginCallSlot* slot_of_this_thread() {
    if (t_slot != nullptr) return t_slot;
    std::call_once(started_, [this] {
      install_crash_handlers();
      std::thread([this] { run(); }).detach();
    });
    auto* slot = new PluginCallSlot();  // lives as long as the watchdog: a thread may end, its slot stays
    const std::lock_guard<std::mutex> lock(mutex_);
    slots_.push_back(slot);
    t_slot = slot;
    return slot;
  }

 private:
  [[noreturn]] void run() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const std::int64_t now = now_ns();
      const std::lock_guard<std::mutex> lock(mutex_);
      for (const PluginCallSlot* slot : slots_) {
        const std::int64_t deadline = slot->deadline_ns.load(std::memory_order_acquire);
        if (deadline == 0 || now < deadline) continue;
        const PluginCallSite* site = slot->site.load(std::memory_order_acquire);
        if (site == nullptr || slot->deadline_ns.load(std::memory_order_acquire) != deadline) continue;
        mpi::fatal(Status(StatusCode::kEnvironment,
                          fmt::format("{}: {} did not return within {:.1f} s (the {} s deadline plus {} s; "
                                      "docs/errors.md 10)",
                                      site->who(), site->call(), site->seconds() + kPluginCallGraceSeconds,
                                      site->seconds(), kPluginCallGraceSeconds)));
      }
    }
  }

  std::once_flag started_;
  std::mutex mutex_;
  std::vector<PluginCallSlot*> slots_;
};

}  // namespace

PluginCallSite::PluginCallSite(std::string who, std::string call, double seconds)
    : who_(std::move(who)),
      call_(std::move(call)),
      seconds_(seconds),
      crash_text_(fmt::format("epsuite: error on {}: {} crashed in {}: signal ", mpi::where(), who_, call_)) {
}

PluginCallGuard::PluginCallGuard(const PluginCallSite& site)
    : slot_(Watchdog::instance().slot_of_this_thread()) {
  previous_site_ = slot_->site.load(std::memory_order_relaxed);
  previous_deadline_ = slot_->deadline_ns.load(std::memory_order_relaxed);
  const auto budget = static_cast<std::int64_t>((site.seconds() + kPluginCallGraceSeconds) * 1e9);
  slot_->deadline_ns.store(0, std::memory_order_release);
  slot_->site.store(&site, std::memory_order_release);
  slot_->deadline_ns.store(now_ns() + budget, std::memory_order_release);
}

PluginCallGuard::~PluginCallGuard() {
  slot_->deadline_ns.store(0, std::memory_order_release);
  slot_->site.store(previous_site_, std::memory_order_release);
  slot_->deadline_ns.store(previous_deadline_, std::memory_order_release);
}

}  // namespace eps::transport
