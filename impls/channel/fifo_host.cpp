#include "impls/channel/fifo_host.hpp"

#include <algorithm>
#include <new>
#include <thread>

#include <fmt/format.h>

namespace eps::channel {
namespace {

std::size_t fifo_bytes(std::uint32_t capacity) { return sizeof(FifoHeader) + capacity * sizeof(Command); }

// For host producers' FIFOs (their head is in host memory).
std::string describe_view(const FifoView& f) {
  return fmt::format("FIFO head {}, tail {}, capacity {}", fifo_atomics::load_acquire(f.head),
                     fifo_atomics::load_acquire(&f.header->tail), f.capacity);
}

// One zeroed word of the device's own memory for the producers' claim counter.
Result<device::Buffer> device_claim_counter(device::Device& device) {
  EPS_ASSIGN_OR_RETURN(device::Buffer head, device.allocate(64, device::MemoryKind::kDevice));
  EPS_RETURN_IF_ERROR(device.fill(head.data(), 0, 64));
  EPS_RETURN_IF_ERROR(device.synchronize());
  return head;
}

}  // namespace

Result<std::unique_ptr<CommandFifo>> CommandFifo::create(std::uint32_t capacity, device::Device* device) {
  if (capacity < 2 || capacity > kMaxFifoCapacity || (capacity & (capacity - 1)) != 0) {
    return invalid_argument("capacity", "must be a power of two in [2, {}], got {}", kMaxFifoCapacity,
                            capacity);
  }
  std::unique_ptr<CommandFifo> fifo(new CommandFifo());
  std::byte* memory = nullptr;
  if (device != nullptr) {
    EPS_ASSIGN_OR_RETURN(fifo->buffer_, device->allocate(fifo_bytes(capacity), device::MemoryKind::kHost));
    memory = fifo->buffer_.as<std::byte>();
  } else {
    fifo->host_.reset(static_cast<std::byte*>(::operator new[](fifo_bytes(capacity), std::align_val_t{64})));
    memory = fifo->host_.get();
  }
  std::fill(memory, memory + fifo_bytes(capacity), std::byte{0});
  auto* header = new (memory) FifoHeader();
  fifo->view_ = {header, reinterpret_cast<Command*>(memory + sizeof(FifoHeader)), capacity, &header->head};
  fifo->device_ = device;
  if (device != nullptr && !device->host_accessible()) {
    EPS_ASSIGN_OR_RETURN(fifo->device_head_, device_claim_counter(*device));
    fifo->view_.head = fifo->device_head_.as<std::uint64_t>();
  }
  return fifo;
}

Result<std::uint64_t> CommandFifo::claimed() const {
  if (!device_head_.data()) return fifo_atomics::load_acquire(view_.head);
  std::uint64_t head = 0;
  EPS_RETURN_IF_ERROR(device_->copy(&head, view_.head, sizeof head));
  return head;
}

CommandFifo::~CommandFifo() = default;

void CommandFifo::close() { fifo_atomics::store_release(&view_.header->closed, 1u); }

std::string CommandFifo::describe() const {
  const Result<std::uint64_t> head = claimed();
  return fmt::format("FIFO head {}, tail {}, capacity {}",
                     head.ok() ? std::to_string(*head) : "unreadable (" + head.status().message() + ")",
                     fifo_atomics::load_acquire(&view_.header->tail), view_.capacity);
}

Status fifo_push_until(FifoProducer& producer, const Command& command, const Deadline& deadline) {
  int polls = 0;
  const PushOutcome outcome = fifo_push(producer, command, [&] {
    if (++polls % 64 == 0) std::this_thread::yield();
    return !deadline.expired();
  });
  if (outcome == PushOutcome::kPushed) return Status();
  if (outcome == PushOutcome::kClosed) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("command FIFO closed (its proxy is gone): {}", describe_view(producer.fifo)));
  }
  return Status(StatusCode::kEnvironment,
                fmt::format("timed out after {} s waiting for a free slot: the proxy stopped draining the {}",
                            deadline.budget_seconds(), describe_view(producer.fifo)));
}

}  // namespace eps::channel
