#include "impls/channel/fifo_host.hpp"

#include <algorithm>
#include <new>
#include <thread>

#include <fmt/format.h>

namespace eps::channel {
namespace {

std::size_t fifo_bytes(std::uint32_t capacity) { return sizeof(FifoHeader) + capacity * sizeof(Command); }

std::string describe_view(const FifoView& f) {
  return fmt::format("FIFO head {}, tail {}, capacity {}", fifo_atomics::load_acquire(&f.header->head),
                     fifo_atomics::load_acquire(&f.header->tail), f.capacity);
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
  fifo->view_ = {new (memory) FifoHeader(), reinterpret_cast<Command*>(memory + sizeof(FifoHeader)),
                 capacity};
  return fifo;
}

CommandFifo::~CommandFifo() = default;

void CommandFifo::close() { fifo_atomics::store_release(&view_.header->closed, 1u); }

std::string CommandFifo::describe() const { return describe_view(view_); }

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
