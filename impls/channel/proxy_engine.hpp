// Proxy threads of the command channel (docs/channel.md 7.1-7.3): they drain command FIFOs and turn the
// commands into fabric puts and remote atomic adds.
//
// Shape. One FIFO per destination rank (so every command for one (destination, channel) goes through one
// FIFO, one proxy thread and one fabric); FIFO d belongs to proxy thread d % threads (default 4, at most one
// per FIFO). A proxy thread loops over its FIFOs: it pops commands in FIFO order (slots retire strictly in
// order; the tail is published per batch), turns each WRITE into a fabric put with `to_put` and each ATOMIC
// into a fabric atomic add (Fabric::try_atomic_add) with `to_atomic` (both called on that thread, in FIFO
// order, once per command), keeps at most `max_in_flight` operations (puts and atomics together) of a FIFO
// without a local completion, and polls the fabric. A FIFO's operations are posted in its order and its
// slots retire in order; the fabric may still complete them out of order (an unordered fabric may also
// apply an atomic before an earlier put), which only the operations' own fabric ordering governs. QUIET
// holds its FIFO until every earlier put and atomic of it completed locally (an atomic's local completion
// means its add is applied at the target); BARRIER holds every FIFO of its thread until all their earlier
// operations completed, then counts itself (barriers_passed). An ATOMIC stops the engine with kUnavailable
// when the engine has no `to_atomic` or the fabric has no remote atomics (Fabric::atomic_support), the
// message saying which.
//
// An idle thread whose FIFOs have puts in flight flushes the fabric (a fabric that holds puts back, like the
// chaos decorator, releases them only then). Completions. Local completions retire puts by counting
// (docs/channel.md 7.2: quiet counts outstanding puts); remote completions (received immediates) are queued
// for the owner, who takes them with take_remote().
//
// Threads. All fabric calls of the engine are serialized by one mutex (fabric backends are not thread-safe);
// `to_put` runs on the FIFO's thread only. The first error of any proxy thread (a fabric failure, a refused
// command) stops every thread, closes every FIFO (producers waiting for a slot return kUnavailable) and is
// returned by status(), quiet() and stop().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "impls/channel/doorbell.hpp"
#include "impls/channel/fifo_host.hpp"
#include "impls/fabric/fabric.hpp"
#include "impls/runtime/deadline.hpp"

namespace eps::channel {

inline constexpr int kDefaultProxyThreads = 4;
inline constexpr int kMaxProxyThreads = 64;

struct ProxyEngineConfig {
  int fifos = 1;  // one per destination rank
  int threads = kDefaultProxyThreads;
  std::uint32_t fifo_capacity = 1024;
  int max_in_flight = 64;            // puts of one FIFO without a local completion
  int batch = 32;                    // commands a thread pops from one FIFO before moving on
  device::Device* device = nullptr;  // FIFOs in its pinned host memory; null = host memory
  double flush_timeout_seconds = kDefaultTimeoutSeconds;  // an idle thread's Fabric::flush
};

// The fabric put of a WRITE command popped from FIFO `fifo` (the engine sets the put's context). Called once
// per command, on the FIFO's thread, in FIFO order, also when the fabric pushes the put back and it is
// retried.
using CommandToPut = std::function<Result<fabric::PutOp>(const Command& command, int fifo)>;
// The fabric atomic add of an ATOMIC command, with the same rules as CommandToPut. atomic_of is the usual
// shape.
using CommandToAtomic = std::function<Result<fabric::AtomicOp>(const Command& command, int fifo)>;

// The atomic add an ATOMIC command describes (command.hpp): its value (word 1, 24 bits) added to the 64-bit
// word at the destination's remote offset of `remote_region`. The fabric checks the offset's alignment.
fabric::AtomicOp atomic_of(const Command& command, int remote_region);

class ProxyEngine {
 public:
  // Validates the config (threads in [1, kMaxProxyThreads], fifos >= 1, capacity a power of two, caps >= 1),
  // creates the FIFOs and starts the threads.
  // Without `to_atomic`, an ATOMIC command stops the engine (kUnavailable).
  static Result<std::unique_ptr<ProxyEngine>> start(const ProxyEngineConfig& config, fabric::Fabric& fabric,
                                                    CommandToPut to_put, CommandToAtomic to_atomic = {});
  ~ProxyEngine();  // stop()

  // The FIFO of destination `fifo` (producers push through it).
  FifoView fifo(int index) const { return fifos_[static_cast<std::size_t>(index)]->view(); }
  int threads() const { return static_cast<int>(threads_.size()); }

  // Waits until every command pushed so far was popped and every put or atomic it made completed locally
  // (counting,
  // docs/channel.md 7.2), polling nothing itself (the proxy threads drive progress). kEnvironment at the
  // deadline naming the first FIFO still busy; the engine's error if it stopped.
  Status quiet(const Deadline& deadline) const;
  // Received immediates since the last call, in arrival order. A call also tells the engine that its owner
  // waits for immediates: proxy thread 0 keeps polling the fabric for a while after it.
  std::vector<std::uint32_t> take_remote();
  // Producers ring after pushing a batch into FIFO `index`: its proxy thread, if asleep on its doorbell,
  // looks at its FIFOs now instead of at its next timeout (docs/channel.md 7.3). Producers that cannot ring
  // are served anyway. wake() rings every thread.
  void wake_fifo(int index);
  void wake();
  // Ok while running; the first error of any thread once one failed.
  Status status() const;
  std::int64_t barriers_passed() const { return barriers_.load(std::memory_order_acquire); }
  // Puts and atomics posted so far (every FIFO).
  std::int64_t puts_posted() const;
  // Stops and joins the threads (idempotent); returns status().
  Status stop();

 private:
  struct FifoState;
  ProxyEngine(const ProxyEngineConfig& config, fabric::Fabric& fabric, CommandToPut to_put,
              CommandToAtomic to_atomic);
  void run_thread(int thread);
  bool serve_fifo(int index, bool& busy);
  bool post(int index, const Command& command);
  template <typename Op, typename Make, typename TryPost>
  bool post_pending(int index, std::optional<Op>& pending, std::string_view kind, Make make,
                    TryPost try_post);
  bool post_write(int index, const Command& command);
  bool post_atomic(int index, const Command& command);
  bool poll_fabric();
  bool flush_when_waiting(int thread, int threads);
  bool settled(int thread, int threads) const;
  bool all_drained() const;
  bool owner_waits_for_immediates() const;
  void idle(int thread, std::uint32_t epoch, std::int64_t last_busy_ns, Backoff& backoff);
  void fail(Status status);
  std::uint64_t claimed_or_zero(std::size_t index) const;
  std::string describe_fifo(int index) const;

  ProxyEngineConfig config_;
  fabric::Fabric& fabric_;
  CommandToPut to_put_;
  CommandToAtomic to_atomic_;
  std::vector<std::unique_ptr<CommandFifo>> fifos_;
  std::vector<std::unique_ptr<FifoState>> states_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  std::atomic<std::int64_t> barriers_{0};
  mutable std::mutex fabric_mutex_;  // every fabric call
  mutable std::mutex error_mutex_;
  Status error_;
  std::mutex remote_mutex_;
  std::vector<std::uint32_t> remote_;
  // One per proxy thread; thread 0 drives the fabric's progress for everyone.
  std::unique_ptr<Doorbell[]> doorbells_;
  std::atomic<std::int64_t> last_take_remote_ns_{0};
};

}  // namespace eps::channel
