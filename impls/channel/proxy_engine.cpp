#include "impls/channel/proxy_engine.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

namespace eps::channel {

// What a proxy thread keeps of one FIFO. Counters read by other threads are atomic.
struct ProxyEngine::FifoState {
  FifoConsumer consumer;
  std::optional<Command> pending;  // popped, not yet posted (in-flight cap or fabric backpressure)
  // Its put once made: to_put runs once per command (it may be stateful, e.g. a sequence number per peer).
  std::optional<fabric::PutOp> pending_put;
  // Likewise an ATOMIC's add once made (to_atomic runs once per command).
  std::optional<fabric::AtomicOp> pending_atomic;
  CommandType held = CommandType::kWrite;  // kQuiet / kBarrier while such a command holds the FIFO
  bool holding = false;
  // Commands popped and done with (posted, or a QUIET/BARRIER released).
  std::atomic<std::int64_t> handled{0};
  // Puts and atomics posted, and their local completions.
  std::atomic<std::int64_t> posted{0};
  std::atomic<std::int64_t> completed{0};

  bool drained() const {
    return posted.load(std::memory_order_acquire) == completed.load(std::memory_order_acquire);
  }
};

namespace {

enum class Posted { kYes, kNotNow, kFailed };

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Status check_config(const ProxyEngineConfig& c) {
  if (c.fifos < 1) return invalid_argument("fifos", "must be >= 1, got {}", c.fifos);
  if (c.threads < 1 || c.threads > kMaxProxyThreads)
    return out_of_range("proxy-threads", 1, kMaxProxyThreads, c.threads);
  if (c.max_in_flight < 1) return invalid_argument("max_in_flight", "must be >= 1, got {}", c.max_in_flight);
  if (c.batch < 1) return invalid_argument("batch", "must be >= 1, got {}", c.batch);
  return Status();
}

}  // namespace

fabric::AtomicOp atomic_of(const Command& command, int remote_region) {
  return fabric::AtomicOp{static_cast<int>(command.destination()), remote_region, command.remote_offset(),
                          command.bytes(), 0};
}

ProxyEngine::ProxyEngine(const ProxyEngineConfig& config, fabric::Fabric& fabric, CommandToPut to_put,
                         CommandToAtomic to_atomic)
    : config_(config), fabric_(fabric), to_put_(std::move(to_put)), to_atomic_(std::move(to_atomic)) {
  config_.threads = std::min(config.threads, config.fifos);  // at most one thread per FIFO
  doorbells_ = std::make_unique<Doorbell[]>(static_cast<std::size_t>(std::max(config_.threads, 1)));
}

Result<std::unique_ptr<ProxyEngine>> ProxyEngine::start(const ProxyEngineConfig& config,
                                                        fabric::Fabric& fabric, CommandToPut to_put,
                                                        CommandToAtomic to_atomic) {
  EPS_RETURN_IF_ERROR(check_config(config));
  std::unique_ptr<ProxyEngine> engine(
      new ProxyEngine(config, fabric, std::move(to_put), std::move(to_atomic)));
  for (int f = 0; f < config.fifos; ++f) {
    EPS_ASSIGN_OR_RETURN(std::unique_ptr<CommandFifo> fifo,
                         CommandFifo::create(config.fifo_capacity, config.device));
    auto state = std::make_unique<FifoState>();
    state->consumer = FifoConsumer(fifo->view());
    engine->fifos_.push_back(std::move(fifo));
    engine->states_.push_back(std::move(state));
  }
  for (int t = 0; t < engine->config_.threads; ++t)
    engine->threads_.emplace_back([e = engine.get(), t] { e->run_thread(t); });
  return engine;
}

ProxyEngine::~ProxyEngine() { (void)stop(); }

Status ProxyEngine::stop() {
  stopping_.store(true, std::memory_order_release);
  wake();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  return status();
}

Status ProxyEngine::status() const {
  std::lock_guard lock(error_mutex_);
  return error_;
}

void ProxyEngine::fail(Status status) {
  {
    std::lock_guard lock(error_mutex_);
    if (error_.ok()) error_ = std::move(status);
  }
  failed_.store(true, std::memory_order_release);
  for (const auto& fifo : fifos_) fifo->close();
  wake();
}

std::int64_t ProxyEngine::puts_posted() const {
  std::int64_t n = 0;
  for (const auto& s : states_) n += s->posted.load(std::memory_order_acquire);
  return n;
}

std::vector<std::uint32_t> ProxyEngine::take_remote() {
  last_take_remote_ns_.store(steady_ns(), std::memory_order_relaxed);
  if (doorbells_[0].has_sleepers()) doorbells_[0].ring();
  std::lock_guard lock(remote_mutex_);
  std::vector<std::uint32_t> out;
  out.swap(remote_);
  return out;
}

// Commands claimed in FIFO `index`; 0 when its counter cannot be read (a failed device copy, which the
// device reports itself).
std::uint64_t ProxyEngine::claimed_or_zero(std::size_t index) const {
  const Result<std::uint64_t> claimed = fifos_[index]->claimed();
  return claimed.ok() ? *claimed : 0;
}

std::string ProxyEngine::describe_fifo(int index) const {
  const FifoState& s = *states_[static_cast<std::size_t>(index)];
  return fmt::format(
      "FIFO {} (destination {}, proxy thread {}): {} commands claimed, {} handled, {} puts and atomics "
      "posted, {} completed",
      index, index, index % config_.threads, claimed_or_zero(static_cast<std::size_t>(index)),
      s.handled.load(), s.posted.load(), s.completed.load());
}

Status ProxyEngine::quiet(const Deadline& deadline) const {
  for (std::size_t f = 0; f < states_.size(); ++f) {
    const FifoState& s = *states_[f];
    Backoff backoff;
    while (static_cast<std::int64_t>(claimed_or_zero(f)) != s.handled.load(std::memory_order_acquire) ||
           !s.drained()) {
      if (failed_.load(std::memory_order_acquire)) return status();
      if (deadline.expired()) {
        return Status(StatusCode::kEnvironment,
                      fmt::format("proxy quiet timed out after {} s: {}", deadline.budget_seconds(),
                                  describe_fifo(static_cast<int>(f))));
      }
      backoff.pause();
    }
  }
  return status();
}

void ProxyEngine::run_thread(int thread) {
  const int threads = config_.threads;
  std::int64_t last_busy_ns = steady_ns();
  Backoff backoff;  // between polls while awake without work
  while (!stopping_.load(std::memory_order_acquire) && !failed_.load(std::memory_order_acquire)) {
    const std::uint32_t epoch = doorbells_[thread].epoch();
    bool busy = false;
    for (int f = thread; f < config_.fifos; f += threads) {
      if (!serve_fifo(f, busy)) return;
    }
    if (!poll_fabric()) return;
    if (busy) {
      last_busy_ns = steady_ns();
      backoff.reset();
      continue;
    }
    // Thread 0 flushes for every FIFO: it is the one that stays awake while anything is in flight.
    if (!(thread == 0 ? flush_when_waiting(0, 1) : flush_when_waiting(thread, threads))) return;
    idle(thread, epoch, last_busy_ns, backoff);
  }
}

// Idle proxy threads (docs/channel.md 7.3): a spinning or yielding thread is always runnable, so on a machine
// with fewer cores than threads it takes turns away from the ranks and the kernel's network processing that
// it waits for. A thread therefore keeps yielding for a while after its last work (back-to-back operations
// find it awake), then sleeps on its doorbell once its FIFOs hold nothing unfinished; thread 0 stays awake
// while any FIFO has operations in flight or the owner is waiting for immediates, since its polls drive the
// fabric for everyone. Awake, it gives way between polls by `backoff` (spin, yield, then 50 µs sleeps), so
// that a long wait for a peer (on a loaded machine, one whose threads are not running) does not keep taking
// turns from the threads that must run for the wait to end.
void ProxyEngine::idle(int thread, std::uint32_t epoch, std::int64_t last_busy_ns, Backoff& backoff) {
  constexpr std::int64_t kAwakeAfterWorkNs = 2'000'000;
  constexpr std::chrono::microseconds kSleep{200};
  const bool keep_polling = steady_ns() - last_busy_ns < kAwakeAfterWorkNs ||
                            !settled(thread, config_.threads) ||
                            (thread == 0 && (!all_drained() || owner_waits_for_immediates()));
  if (keep_polling && backoff.sleeping()) {
    backoff.skip();
    doorbells_[thread].wait(epoch, Backoff::kSleep);  // a producer's ring ends it at once
    return;
  }
  if (keep_polling) {
    backoff.pause();
    return;
  }
  backoff.reset();
  doorbells_[thread].wait(epoch, kSleep);
}

// Whether this thread's FIFOs (thread, thread + threads, ...) hold nothing unfinished: no command waiting to
// be posted or holding its FIFO, every posted operation completed (pending and holding are the thread's own).
bool ProxyEngine::settled(int thread, int threads) const {
  for (int f = thread; f < config_.fifos; f += threads) {
    const FifoState& s = *states_[static_cast<std::size_t>(f)];
    if (!s.drained() || s.pending || s.pending_atomic || s.holding) return false;
  }
  return true;
}

// Every FIFO's posted operations completed (the atomic counters only: any thread may ask).
bool ProxyEngine::all_drained() const {
  return std::all_of(states_.begin(), states_.end(), [](const auto& s) { return s->drained(); });
}

bool ProxyEngine::owner_waits_for_immediates() const {
  constexpr std::int64_t kWindowNs = 500'000;
  return steady_ns() - last_take_remote_ns_.load(std::memory_order_relaxed) < kWindowNs;
}

void ProxyEngine::wake_fifo(int index) { doorbells_[index % config_.threads].ring(); }

void ProxyEngine::wake() {
  for (int t = 0; t < config_.threads; ++t) doorbells_[t].ring();
}

// An idle thread with puts in flight hands them all to the provider: a fabric that holds puts back (the chaos
// decorator) would otherwise keep them until a quiet that only the proxies could issue.
bool ProxyEngine::flush_when_waiting(int thread, int threads) {
  bool waiting = false;
  for (int f = thread; f < config_.fifos && !waiting; f += threads)
    waiting = !states_[static_cast<std::size_t>(f)]->drained();
  if (!waiting) return true;
  const Status flushed = [&] {
    std::lock_guard lock(fabric_mutex_);
    return fabric_.flush(Deadline(config_.flush_timeout_seconds));
  }();
  if (!flushed.ok()) {
    fail(flushed);
    return false;
  }
  return true;
}

bool ProxyEngine::post(int index, const Command& command) {
  return command.type() == CommandType::kAtomic ? post_atomic(index, command) : post_write(index, command);
}

// Posts FIFO `index`'s pending operation, made once by `make` (its translation failing stops the engine) and
// retried as made while the fabric pushes back; false when it was not posted now or the engine failed
// (failed_ says which). A refusal of the operation itself stops the engine with the fabric's reason and the
// FIFO.
template <typename Op, typename Make, typename TryPost>
bool ProxyEngine::post_pending(int index, std::optional<Op>& pending, std::string_view kind, Make make,
                               TryPost try_post) {
  if (!pending) {
    Result<Op> op = make();
    if (!op.ok()) {
      fail(Status(op.status().code(),
                  fmt::format("proxy: {} ({})", op.status().message(), describe_fifo(index))));
      return false;
    }
    op->context = static_cast<std::uint64_t>(index);
    pending = *op;
  }
  Result<bool> posted = [&] {
    std::lock_guard lock(fabric_mutex_);
    return try_post(*pending);
  }();
  if (!posted.ok()) {
    fail(Status(posted.status().code(), fmt::format("proxy: {} command: {} ({})", kind,
                                                    posted.status().message(), describe_fifo(index))));
    return false;
  }
  if (!*posted) return false;
  pending.reset();
  states_[static_cast<std::size_t>(index)]->posted.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

bool ProxyEngine::post_write(int index, const Command& command) {
  return post_pending(
      index, states_[static_cast<std::size_t>(index)]->pending_put, "WRITE",
      [&] { return to_put_(command, index); }, [&](const fabric::PutOp& op) { return fabric_.try_put(op); });
}

// Without a translation for atomics the engine stops, saying so.
bool ProxyEngine::post_atomic(int index, const Command& command) {
  if (!to_atomic_) {
    fail(Status(StatusCode::kUnavailable,
                fmt::format("proxy: ATOMIC command, but this engine has no atomic "
                            "translation (ProxyEngine::start without CommandToAtomic; {})",
                            describe_fifo(index))));
    return false;
  }
  return post_pending(
      index, states_[static_cast<std::size_t>(index)]->pending_atomic, "ATOMIC",
      [&] { return to_atomic_(command, index); },
      [&](const fabric::AtomicOp& op) { return fabric_.try_atomic_add(op); });
}

// Serves up to `batch` commands of FIFO `index`; false only when the engine failed.
bool ProxyEngine::serve_fifo(int index, bool& busy) {
  FifoState& s = *states_[static_cast<std::size_t>(index)];
  const int threads = config_.threads;
  for (int n = 0; n < config_.batch; ++n) {
    if (s.holding) {
      if (!s.drained()) break;
      if (s.held == CommandType::kBarrier) {
        bool all = true;
        for (int f = index % threads; f < config_.fifos; f += threads)
          all = all && states_[static_cast<std::size_t>(f)]->drained();
        if (!all) break;
        barriers_.fetch_add(1, std::memory_order_acq_rel);
      }
      s.holding = false;
      s.handled.fetch_add(1, std::memory_order_acq_rel);
      busy = true;
    }
    Command c;
    if (s.pending) {
      c = *s.pending;
    } else if (!s.consumer.try_pop(c)) {
      break;
    }
    busy = true;
    s.pending.reset();
    switch (c.type()) {
      case CommandType::kWrite:
      case CommandType::kAtomic: {
        const std::int64_t in_flight =
            s.posted.load(std::memory_order_relaxed) - s.completed.load(std::memory_order_acquire);
        if (in_flight >= config_.max_in_flight) {
          s.pending = c;
          s.consumer.publish_tail();
          return true;
        }
        if (!post(index, c)) {
          if (failed_.load(std::memory_order_acquire)) return false;
          s.pending = c;  // backpressure: poll, then try again
          s.consumer.publish_tail();
          return true;
        }
        s.handled.fetch_add(1, std::memory_order_acq_rel);
        break;
      }
      case CommandType::kQuiet:
      case CommandType::kBarrier:
        s.holding = true;
        s.held = c.type();
        break;
      default:
        fail(Status(StatusCode::kInvalidArgument,
                    fmt::format("proxy: command type {} is not WRITE (1), ATOMIC (2), QUIET (3) or BARRIER "
                                "(4) ({})",
                                static_cast<std::uint32_t>(c.type()), describe_fifo(index))));
        return false;
    }
  }
  s.consumer.publish_tail();
  return true;
}

bool ProxyEngine::poll_fabric() {
  fabric::Completion completions[64];
  for (;;) {
    Result<std::size_t> n = [&] {
      std::lock_guard lock(fabric_mutex_);
      return fabric_.poll(completions);
    }();
    if (!n.ok()) {
      fail(n.status());
      return false;
    }
    for (std::size_t i = 0; i < *n; ++i) {
      const fabric::Completion& c = completions[i];
      if (c.kind == fabric::CompletionKind::kLocal) {
        states_[static_cast<std::size_t>(c.context)]->completed.fetch_add(1, std::memory_order_acq_rel);
      } else {
        std::lock_guard lock(remote_mutex_);
        remote_.push_back(c.imm);
      }
    }
    if (*n < std::size(completions)) return true;
  }
}

}  // namespace eps::channel
