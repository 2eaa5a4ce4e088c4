#include "impls/device/cpu/cpu_queue.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace eps::device::cpu {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::uint64_t load_value(const void* address, ValueWidth width) {
  if (width == ValueWidth::k32) {
    return std::atomic_ref<std::uint32_t>(*static_cast<std::uint32_t*>(const_cast<void*>(address)))
        .load(std::memory_order_acquire);
  }
  return std::atomic_ref<std::uint64_t>(*static_cast<std::uint64_t*>(const_cast<void*>(address)))
      .load(std::memory_order_acquire);
}

void store_value(void* address, std::uint64_t value, ValueWidth width) {
  if (width == ValueWidth::k32) {
    std::atomic_ref<std::uint32_t>(*static_cast<std::uint32_t*>(address))
        .store(static_cast<std::uint32_t>(value), std::memory_order_release);
  } else {
    std::atomic_ref<std::uint64_t>(*static_cast<std::uint64_t*>(address))
        .store(value, std::memory_order_release);
  }
}

bool holds(const Op& op, std::uint64_t seen) {
  return op.condition == WaitCondition::kEqual ? seen == op.value : seen >= op.value;
}

// The latest of the generations that ran (a queue completes its records in order, two queues may not).
void complete(EventState& state, std::uint64_t generation) {
  state.time_ns.store(now_ns(), std::memory_order_relaxed);
  std::uint64_t seen = state.completed.load(std::memory_order_relaxed);
  while (seen < generation &&
         !state.completed.compare_exchange_weak(seen, generation, std::memory_order_release)) {
  }
}

void fail_event(EventState& state, const Status& failure) {
  const std::lock_guard<std::mutex> lock(state.mutex);
  if (state.failure.ok()) state.failure = failure;
}

}  // namespace

Result<bool> CpuEvent::done() {
  const std::uint64_t recorded = state_->recorded.load(std::memory_order_acquire);
  if (state_->completed.load(std::memory_order_acquire) >= recorded) return true;
  const std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->failure.ok()) return state_->failure;
  return false;
}

Status CpuEvent::wait(const Deadline& deadline) {
  return wait_until_done(
      deadline, [this] { return done(); },
      [this] {
        return fmt::format("an event of the {} device (recorded {} times, completed up to record {})",
                           state_->owner->backend_name(), state_->recorded.load(), state_->completed.load());
      });
}

CpuQueue::CpuQueue(QueueHost& host, int index) : host_(host), index_(index) {}

CpuQueue::~CpuQueue() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::string CpuQueue::name() const {
  return index_ == 0 ? fmt::format("{} default queue", host_.backend_name())
                     : fmt::format("{} queue {}", host_.backend_name(), index_);
}

std::string CpuQueue::describe(const Op& op) const {
  const char* memory = op.device_address ? "device" : "host";
  switch (op.kind) {
    case Op::Kind::kCopy:
      return fmt::format("a copy of {} bytes", op.bytes);
    case Op::Kind::kFill:
      return fmt::format("a fill of {} bytes", op.bytes);
    case Op::Kind::kLaunch:
      return fmt::format("kernel {}", kernel_name(op.kernel));
    case Op::Kind::kWriteValue:
      return fmt::format("write_value of {} to the {}-bit word at {} ({} memory)", op.value,
                         value_bytes(op.width) * 8, op.address, memory);
    case Op::Kind::kWaitValue:
      return fmt::format("wait_value: the {}-bit value at {} ({} memory) {} {}", value_bytes(op.width) * 8,
                         op.address, memory, wait_condition_name(op.condition), op.value);
    case Op::Kind::kRecord:
      return "an event record";
    case Op::Kind::kWaitEvent:
      return fmt::format("a wait for event record {}", op.generation);
  }
  return "an operation";
}

bool CpuQueue::runs_at_once(const Op& op) const {
  if (op.kind == Op::Kind::kWaitValue) return holds(op, load_value(op.dst, op.width));
  if (op.kind == Op::Kind::kWaitEvent)
    return op.event->completed.load(std::memory_order_acquire) >= op.generation;
  return true;
}

Status CpuQueue::submit(Op op) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!error_.ok()) return error_;
  if (capturing_) {
    captured_copies_ += op.copies;
    captured_.push_back(std::move(op));
    return Status();
  }
  host_.add_copies(op.copies);
  if (pending_.empty() && !busy_ && runs_at_once(op)) {
    busy_ = true;
    lock.unlock();
    const Status status = execute(op);
    lock.lock();
    busy_ = false;
    if (!status.ok() && error_.ok()) {
      error_ = status;
      drop_pending(status);
    }
    idle_cv_.notify_all();
    work_cv_.notify_all();
    return status;
  }
  pending_.push_back(std::move(op));
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  work_cv_.notify_all();
  return Status();
}

void CpuQueue::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return (!pending_.empty() || stop_) && !busy_; });
    if (pending_.empty()) return;  // stopped and drained
    const Op op = std::move(pending_.front());
    pending_.pop_front();
    busy_ = true;
    running_ = describe(op);
    lock.unlock();
    const Status status = execute(op);
    lock.lock();
    busy_ = false;
    running_.clear();
    if (!status.ok() && error_.ok()) {
      error_ = status;
      drop_pending(status);
    }
    idle_cv_.notify_all();
  }
}

void CpuQueue::drop_pending(const Status& failure) {
  for (const Op& op : pending_) {
    if (op.kind == Op::Kind::kRecord) fail_event(*op.event, failure);
  }
  pending_.clear();
}

Status CpuQueue::execute(const Op& op) {
  switch (op.kind) {
    case Op::Kind::kCopy:
      std::memmove(op.dst, op.src, op.bytes);
      return Status();
    case Op::Kind::kFill:
      std::memset(op.dst, static_cast<int>(op.value), op.bytes);
      return Status();
    case Op::Kind::kLaunch:
      host_.run_kernel(op.kernel, op.args.data());
      return Status();
    case Op::Kind::kWriteValue:
      store_value(op.dst, op.value, op.width);
      return Status();
    case Op::Kind::kWaitValue:
      return wait_for_value(op);
    case Op::Kind::kRecord:
      complete(*op.event, op.generation);
      return Status();
    case Op::Kind::kWaitEvent:
      return wait_for_event(op);
  }
  return Status(StatusCode::kEnvironment, "unknown queue operation");
}

Status CpuQueue::wait_for_value(const Op& op) {
  const Deadline deadline(op.timeout_seconds);
  Backoff backoff;
  for (;;) {
    const std::uint64_t seen = load_value(op.dst, op.width);
    if (holds(op, seen)) return Status();
    bool stopping = false;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping = stop_;
    }
    if (stopping || deadline.expired()) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("{}: wait_value {} after {:.3f} s: the {}-bit value at {} ({} memory) never "
                                "became {} {}; last seen {}",
                                name(), stopping ? "abandoned (the queue was destroyed)" : "gave up",
                                op.timeout_seconds - deadline.remaining_seconds(), value_bytes(op.width) * 8,
                                op.address, op.device_address ? "device" : "host",
                                wait_condition_name(op.condition), op.value, seen));
    }
    backoff.pause();
  }
}

Status CpuQueue::wait_for_event(const Op& op) {
  const Deadline deadline(host_.wait_seconds());
  Backoff backoff;
  for (;;) {
    if (op.event->completed.load(std::memory_order_acquire) >= op.generation) return Status();
    {
      const std::lock_guard<std::mutex> lock(op.event->mutex);
      if (!op.event->failure.ok()) return op.event->failure;
    }
    bool stopping = false;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping = stop_;
    }
    if (stopping || deadline.expired()) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("{}: a wait for an event {} after {:.3f} s: record {} never completed",
                                name(), stopping ? "abandoned (the queue was destroyed)" : "gave up",
                                deadline.budget_seconds() - deadline.remaining_seconds(), op.generation));
    }
    backoff.pause();
  }
}

Status CpuQueue::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return Status();
  if (dst == nullptr || src == nullptr) {
    return invalid_argument("copy", "needs non-null addresses for {} bytes (dst {}, src {})", bytes, dst,
                            src);
  }
  const CpuMemory& memory = host_.memory();
  Op op;
  op.kind = Op::Kind::kCopy;
  op.bytes = bytes;
  EPS_ASSIGN_OR_RETURN(op.dst, memory.translate(dst, bytes, "copy.dst"));
  EPS_ASSIGN_OR_RETURN(void* from, memory.translate(src, bytes, "copy.src"));
  op.src = from;
  op.copies = ledger_entry(memory.is_device(dst), memory.is_device(src), bytes);
  return submit(std::move(op));
}

Status CpuQueue::fill(void* dst, std::uint8_t value, std::size_t bytes) {
  if (bytes == 0) return Status();
  if (dst == nullptr) return invalid_argument("fill", "needs a non-null address for {} bytes", bytes);
  Op op;
  op.kind = Op::Kind::kFill;
  op.bytes = bytes;
  op.value = value;
  EPS_ASSIGN_OR_RETURN(op.dst, host_.memory().translate(dst, bytes, "fill.dst"));
  return submit(std::move(op));
}

Status CpuQueue::launch(KernelId id, const void* args, std::size_t args_bytes) {
  Op op;
  op.kind = Op::Kind::kLaunch;
  op.kernel = id;
  EPS_RETURN_IF_ERROR(host_.prepare_kernel(id, args, args_bytes, op.args.data()));
  return submit(std::move(op));
}

// A write_value or wait_value operation on the word at `address`, translated.
Result<Op> CpuQueue::value_op(Op::Kind kind, const void* address, std::uint64_t value,
                              ValueWidth width) const {
  Op op;
  op.kind = kind;
  op.value = value;
  op.width = width;
  op.address = address;
  op.device_address = host_.memory().is_device(address);
  EPS_ASSIGN_OR_RETURN(
      op.dst,
      host_.memory().translate(address, value_bytes(width),
                               kind == Op::Kind::kWriteValue ? "write_value.address" : "wait_value.address"));
  return op;
}

Status CpuQueue::write_value(void* address, std::uint64_t value, ValueWidth width) {
  EPS_RETURN_IF_ERROR(check_write_value(address, value, width));
  EPS_ASSIGN_OR_RETURN(Op op, value_op(Op::Kind::kWriteValue, address, value, width));
  return submit(std::move(op));
}

Status CpuQueue::wait_value(const void* address, std::uint64_t value, WaitCondition condition,
                            ValueWidth width, double timeout_seconds) {
  EPS_RETURN_IF_ERROR(check_wait_value(address, value, width, timeout_seconds));
  EPS_ASSIGN_OR_RETURN(Op op, value_op(Op::Kind::kWaitValue, address, value, width));
  op.condition = condition;
  op.timeout_seconds = timeout_seconds;
  return submit(std::move(op));
}

Result<CpuEvent*> CpuQueue::own_event(Event& event, std::string_view call) const {
  auto* cpu_event = dynamic_cast<CpuEvent*>(&event);
  if (cpu_event == nullptr || cpu_event->state()->owner != &host_) {
    return invalid_argument(call, "the event was not made by this {} device", host_.backend_name());
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  if (capturing_) {
    return invalid_argument(call, "{} is capturing a graph: events cannot be captured", name());
  }
  return cpu_event;
}

Status CpuQueue::record(Event& event) {
  EPS_ASSIGN_OR_RETURN(CpuEvent * cpu_event, own_event(event, "record"));
  Op op;
  op.kind = Op::Kind::kRecord;
  op.event = cpu_event->state();
  op.generation = op.event->recorded.fetch_add(1, std::memory_order_acq_rel) + 1;
  const Status submitted = submit(op);
  if (!submitted.ok()) fail_event(*op.event, submitted);
  return submitted;
}

Status CpuQueue::wait(Event& event) {
  EPS_ASSIGN_OR_RETURN(CpuEvent * cpu_event, own_event(event, "wait"));
  Op op;
  op.kind = Op::Kind::kWaitEvent;
  op.event = cpu_event->state();
  op.generation = op.event->recorded.load(std::memory_order_acquire);
  if (op.generation == 0) return Status();  // never recorded: nothing to wait for
  return submit(std::move(op));
}

Result<bool> CpuQueue::idle() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!error_.ok()) return error_;
  return pending_.empty() && !busy_;
}

Status CpuQueue::synchronize(const Deadline& deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (capturing_) {
    return invalid_argument("synchronize", "{} is capturing a graph (call end_capture first)", name());
  }
  while (!pending_.empty() || busy_) {
    const double remaining = deadline.remaining_seconds();
    if (remaining <= 0) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("timed out after {:.3f} s waiting for {}: {} operations pending, running {}",
                                deadline.budget_seconds(), name(), pending_.size(),
                                running_.empty() ? "one on the calling thread" : running_));
    }
    idle_cv_.wait_for(lock, std::chrono::duration<double>(std::min(remaining, 0.05)));
  }
  return error_;
}

Status CpuQueue::begin_capture() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (capturing_) return invalid_argument("begin_capture", "{} is capturing a graph already", name());
  if (!error_.ok()) return error_;
  capturing_ = true;
  captured_.clear();
  captured_copies_ = CopyLedger{};
  return Status();
}

Result<std::unique_ptr<Graph>> CpuQueue::end_capture() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!capturing_)
    return invalid_argument("end_capture", "{} is not capturing (call begin_capture first)", name());
  capturing_ = false;
  return std::unique_ptr<Graph>(
      std::make_unique<CpuGraph>(&host_, std::exchange(captured_, {}), captured_copies_));
}

Status CpuQueue::replay(const Graph& graph) {
  const auto* cpu_graph = dynamic_cast<const CpuGraph*>(&graph);
  if (cpu_graph == nullptr || cpu_graph->owner() != &host_) {
    return invalid_argument("replay", "the graph was not captured on this {} device", host_.backend_name());
  }
  for (Op op : cpu_graph->ops()) {
    op.copies = CopyLedger{};  // the graph's copies are counted once below
    EPS_RETURN_IF_ERROR(submit(std::move(op)));
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  if (capturing_) {
    captured_copies_ += graph.copies();
  } else {
    host_.add_copies(graph.copies());
  }
  return Status();
}

}  // namespace eps::device::cpu
