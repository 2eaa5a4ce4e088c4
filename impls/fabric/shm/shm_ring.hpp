// ShmRing: the ordered completion ring of the shm fabric, one per (source, target) rank pair, living in
// the target's shared-memory control segment (impls/fabric/shm/shm_fabric.cpp).
//
// Single producer (the source rank's process) and single consumer (the target's), possibly in different
// processes: head and tail are plain 64-bit words in the shared memory accessed through std::atomic_ref,
// so the layout is fixed bytes that every process maps (zero-filled memory is an empty ring).
// - `has_space()` (producer): whether push would succeed (only the consumer changes that, by freeing).
// - `push(imm)` (producer): appends one entry; false when the ring holds `capacity()` entries (the
//   caller reports backpressure). The entry is published with a release store of tail, so every write the
//   producer made before push (the put's bytes) is visible to a consumer that sees the entry.
// - `pop_all(f)` (consumer): calls f(imm) for every published entry in push order (acquire load of tail),
//   then frees them (release store of head, so the producer may overwrite those slots). Returns the count.
// Indices grow without wrapping (64 bits); slot = index mod capacity.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace eps::fabric::shm {

class ShmRing {
 public:
  // Bytes of shared memory one ring of `capacity` entries occupies (a multiple of 64).
  static constexpr std::size_t bytes(std::uint32_t capacity) {
    return kHeaderBytes + (static_cast<std::size_t>(capacity) * sizeof(std::uint32_t) + 63) / 64 * 64;
  }

  // `base` points at bytes(capacity) of 64-byte aligned, initially zero-filled shared memory.
  ShmRing(void* base, std::uint32_t capacity)
      : head_(static_cast<std::uint64_t*>(base)),
        tail_(static_cast<std::uint64_t*>(static_cast<void*>(static_cast<std::byte*>(base) + 64))),
        slots_(static_cast<std::uint32_t*>(static_cast<void*>(static_cast<std::byte*>(base) + kHeaderBytes))),
        capacity_(capacity) {}

  std::uint32_t capacity() const { return capacity_; }

  bool has_space() const {
    const std::uint64_t tail = std::atomic_ref<std::uint64_t>(*tail_).load(std::memory_order_relaxed);
    const std::uint64_t head = std::atomic_ref<std::uint64_t>(*head_).load(std::memory_order_acquire);
    return tail - head < capacity_;
  }

  bool push(std::uint32_t imm) {
    const std::uint64_t tail = std::atomic_ref<std::uint64_t>(*tail_).load(std::memory_order_relaxed);
    const std::uint64_t head = std::atomic_ref<std::uint64_t>(*head_).load(std::memory_order_acquire);
    if (tail - head >= capacity_) return false;
    slots_[tail % capacity_] = imm;
    std::atomic_ref<std::uint64_t>(*tail_).store(tail + 1, std::memory_order_release);
    return true;
  }

  template <typename F>
  std::size_t pop_all(F&& f) {
    const std::uint64_t head = std::atomic_ref<std::uint64_t>(*head_).load(std::memory_order_relaxed);
    const std::uint64_t tail = std::atomic_ref<std::uint64_t>(*tail_).load(std::memory_order_acquire);
    for (std::uint64_t i = head; i != tail; ++i) f(slots_[i % capacity_]);
    if (tail != head) std::atomic_ref<std::uint64_t>(*head_).store(tail, std::memory_order_release);
    return static_cast<std::size_t>(tail - head);
  }

 private:
  // head and tail on separate cache lines: the consumer writes one, the producer the other.
  static constexpr std::size_t kHeaderBytes = 128;
  static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
                "shm rings need lock-free 64-bit atomics");

  std::uint64_t* head_;
  std::uint64_t* tail_;
  std::uint32_t* slots_;
  std::uint32_t capacity_;
};

}  // namespace eps::fabric::shm
