// The host side of a command FIFO (fifo.hpp): its memory and a host producer's push with a deadline.
//
// A CommandFifo owns one FIFO: the header and a power-of-two number of slots in memory both sides can reach.
// Without a device that is ordinary host memory; with a device it is that device's pinned host memory
// (Device::allocate kHost: cudaMallocHost / hipHostMalloc), which its kernels reach over PCIe, as the
// command channel of docs/channel.md 7 needs, except the producers' claim counter, which is one word of the
// device's own memory when the host cannot address that memory (fifo.hpp FifoView).
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "impls/channel/fifo.hpp"
#include "impls/device/device.hpp"
#include "impls/runtime/deadline.hpp"

namespace eps::channel {

inline constexpr std::uint32_t kMaxFifoCapacity = 1u << 24;

class CommandFifo {
 public:
  // capacity: a power of two in [2, kMaxFifoCapacity] (kInvalidArgument otherwise); device null = host
  // memory.
  static Result<std::unique_ptr<CommandFifo>> create(std::uint32_t capacity,
                                                     device::Device* device = nullptr);
  ~CommandFifo();
  CommandFifo(const CommandFifo&) = delete;
  CommandFifo& operator=(const CommandFifo&) = delete;

  FifoView view() const { return view_; }
  // Commands claimed so far (the head). A counter in a GPU's memory is read with a device copy, which waits
  // for the work queued on the device: call it when the producers' kernels are done (diagnostics).
  Result<std::uint64_t> claimed() const;
  // Ends every producer's wait (kClosed): the proxy that drains this FIFO is gone.
  void close();
  // "FIFO head H, tail T, capacity C" for diagnostics.
  std::string describe() const;

 private:
  CommandFifo() = default;
  // Frees memory from the 64-byte aligned operator new[] with the matching aligned delete[] (found by
  // ci/sanitize: a plain unique_ptr<std::byte[]> paired the aligned new with the unaligned delete).
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  device::Buffer buffer_;                             // with a device
  std::unique_ptr<std::byte[], AlignedDelete> host_;  // without one
  device::Buffer device_head_;                        // the claim counter of a device the host cannot address
  device::Device* device_ = nullptr;
  FifoView view_;
};

// Pushes `command` from a host thread, waiting while the ring is full until `deadline`: kEnvironment naming
// the FIFO's head and tail when it expires, kUnavailable when the FIFO was closed (its proxy is gone).
Status fifo_push_until(FifoProducer& producer, const Command& command, const Deadline& deadline);

}  // namespace eps::channel
