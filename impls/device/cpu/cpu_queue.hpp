// The queues, events and graphs of the `cpu` devices (docs/devices.md 12.1-12.3, 12.6): Queue, Event and
// Graph of device.hpp on host threads.
//
// Execution. Each queue owns a worker thread (started at its first deferred operation) that runs the
// queue's operations one at a time in enqueue order. Fast path: an operation enqueued while the queue is
// idle (nothing pending, nothing running) and able to run at once runs on the calling thread before the
// enqueue returns, exactly as the `cpu` device did before queues were explicit; a wait_value whose
// condition does not hold yet, or a wait for an event not yet done, is deferred to the worker, and so is
// everything enqueued behind it. Either way an operation starts only after every earlier one completed.
//
// Addresses are translated when an operation is enqueued (CpuMemory::translate; for kernels, the fields
// of kernel_pointers.hpp), so a bad range is refused by the enqueue call; host<->device copies are counted
// into the device's ledger there too (into the graph's count while capturing).
//
// Waits. A wait_value polls the word (acquire loads, Backoff) until its condition holds or its timeout
// passes; a wait for an event polls it up to the device's timeout. A wait that gives up fails the queue:
// the failure ("cpu-isolated queue 1: wait_value gave up after 2 s: the 64-bit value at 0x7f.. (device
// memory) never became >= 5; last seen 3") is returned by every later call on the queue, and the
// operations behind the wait are dropped (events they would have completed report the failure).
// Destroying a queue abandons a running wait the same way and waits for the rest.
//
// Graphs. A capturing queue appends each (translated, checked) operation to a list instead of running
// it; replay() submits that list's operations in order, on any queue of the same device, and adds the
// list's host<->device copies to the ledger.
#pragma once

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "impls/device/cpu/cpu_memory.hpp"
#include "impls/device/device.hpp"

namespace eps::device::cpu {

// What a queue needs from its device.
class QueueHost {
 public:
  virtual ~QueueHost() = default;
  virtual const CpuMemory& memory() const = 0;
  // Checks a launch of kernel `id` (the id, the size of `args`) and writes its argument struct to `out`
  // (kMaxKernelArgsBytes) with every pointer field translated (kernel_pointers.hpp).
  virtual Status prepare_kernel(KernelId id, const void* args, std::size_t args_bytes,
                                std::byte* out) const = 0;
  // Runs kernel `id` over an argument struct prepare_kernel wrote.
  virtual void run_kernel(KernelId id, const void* args) = 0;
  virtual void add_copies(const CopyLedger& entry) = 0;
  // "cpu", "cpu-isolated": the device in messages.
  virtual const std::string& backend_name() const = 0;
  // How long a wait for an event may take (Device::timeout_seconds).
  virtual double wait_seconds() const = 0;
};

// The bytes of the largest kernel argument struct.
inline constexpr std::size_t kMaxKernelArgsBytes = [] {
  std::size_t most = 0;
#define EPS_ARGS_SIZE(camel, snake, Args) most = sizeof(Args) > most ? sizeof(Args) : most;
  EPS_DEVICE_KERNELS(EPS_ARGS_SIZE)
#undef EPS_ARGS_SIZE
  return most;
}();

struct EventState;

// One queue operation, translated and checked.
struct Op {
  enum class Kind : std::uint8_t { kCopy, kFill, kLaunch, kWriteValue, kWaitValue, kRecord, kWaitEvent };
  Kind kind = Kind::kCopy;
  void* dst = nullptr;  // private addresses
  const void* src = nullptr;
  std::size_t bytes = 0;
  std::uint64_t value = 0;  // fill byte, value written or awaited
  ValueWidth width = ValueWidth::k64;
  WaitCondition condition = WaitCondition::kGreaterEqual;
  double timeout_seconds = 0;
  const void* address = nullptr;  // the caller's address, for messages
  bool device_address = false;
  KernelId kernel = KernelId::kCount;
  alignas(16) std::array<std::byte, kMaxKernelArgsBytes> args{};
  std::shared_ptr<EventState> event;
  std::uint64_t generation = 0;  // of the event record, or the one awaited
  CopyLedger copies;             // the host<->device copy this operation is
};

// Shared between an event and the queues that record or wait for it.
struct EventState {
  explicit EventState(const QueueHost* owner) : owner(owner) {}
  const QueueHost* owner;
  std::atomic<std::uint64_t> recorded{0};   // generations handed out by record()
  std::atomic<std::uint64_t> completed{0};  // the latest generation that ran
  std::atomic<std::int64_t> time_ns{0};     // steady clock when it ran
  std::mutex mutex;
  Status failure;  // the recording queue's, when a pending record was dropped
};

class CpuEvent final : public Event {
 public:
  explicit CpuEvent(const QueueHost* owner) : state_(std::make_shared<EventState>(owner)) {}
  Result<bool> done() override;
  Status wait(const Deadline& deadline) override;
  const std::shared_ptr<EventState>& state() const { return state_; }

 private:
  std::shared_ptr<EventState> state_;
};

class CpuGraph final : public Graph {
 public:
  CpuGraph(const QueueHost* owner, std::vector<Op> ops, const CopyLedger& copies)
      : Graph(copies), owner_(owner), ops_(std::move(ops)) {}
  const QueueHost* owner() const { return owner_; }
  const std::vector<Op>& ops() const { return ops_; }

 private:
  const QueueHost* owner_;
  std::vector<Op> ops_;
};

class CpuQueue final : public Queue {
 public:
  CpuQueue(QueueHost& host, int index);
  ~CpuQueue() override;
  CpuQueue(const CpuQueue&) = delete;
  CpuQueue& operator=(const CpuQueue&) = delete;

  Status copy(void* dst, const void* src, std::size_t bytes) override;
  Status fill(void* dst, std::uint8_t value, std::size_t bytes) override;
  Status launch(KernelId id, const void* args, std::size_t args_bytes) override;
  Status write_value(void* address, std::uint64_t value, ValueWidth width) override;
  Status wait_value(const void* address, std::uint64_t value, WaitCondition condition, ValueWidth width,
                    double timeout_seconds) override;
  Status record(Event& event) override;
  Status wait(Event& event) override;
  Result<bool> idle() override;
  Status synchronize(const Deadline& deadline) override;
  Status begin_capture() override;
  Result<std::unique_ptr<Graph>> end_capture() override;
  Status replay(const Graph& graph) override;

 private:
  Status submit(Op op);
  bool runs_at_once(const Op& op) const;
  Status execute(const Op& op);
  Status wait_for_value(const Op& op);
  Status wait_for_event(const Op& op);
  void worker_loop();
  void drop_pending(const Status& failure);  // mutex_ held
  std::string describe(const Op& op) const;
  std::string name() const;
  Result<CpuEvent*> own_event(Event& event, std::string_view call) const;
  Result<Op> value_op(Op::Kind kind, const void* address, std::uint64_t value, ValueWidth width) const;

  QueueHost& host_;
  int index_;  // 0 = the default queue
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  // the worker waits for work
  std::condition_variable idle_cv_;  // synchronize waits for the queue to drain
  std::deque<Op> pending_;
  bool busy_ = false;  // an operation is running (inline or on the worker)
  bool stop_ = false;
  Status error_;
  std::string running_;  // what runs now, for messages
  bool capturing_ = false;
  std::vector<Op> captured_;
  CopyLedger captured_copies_;
  std::thread worker_;
};

}  // namespace eps::device::cpu
