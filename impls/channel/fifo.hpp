// The command FIFO of docs/channel.md 7.3: a ring of 16-byte command slots in host-visible memory between
// producers (GPU warps, or host threads standing in for them on the `cpu` device) and one CPU proxy thread.
//
// Protocol:
// - A producer claims index i with an atomic fetch-add of `head` (FifoView says where it lives), waits until
// i - tail < capacity (reading
//   `tail` with acquire, caching it between claims), writes words 1-3 of slot i % capacity and publishes the
//   command with a release store of word 0, which is never all-zero (a command's type is never 0).
// - The proxy acquire-loads word 0 of the slot at `tail`: zero means empty. After copying the command it
// zeroes
//   the slot and release-stores tail + 1, so a producer that sees the new tail also sees the zeroed slot.
//   Slots are retired strictly in index order; the proxy may pop a batch and publish the tail once.
// - A full ring makes the producer wait, never drop. The wait has a deadline (docs/errors.md 10): on the host
//   fifo_push_until returns kEnvironment naming the FIFO's head and tail; a device producer gives up after a
//   number of polls and reports it. `closed` (set by the owner when its proxy is gone) ends every wait.
// The producer side is EPS_HD, so the CUDA/HIP kernels and host threads push the same way; the memory model
// mapping is: host = GCC __atomic builtins; CUDA = cuda::atomic_ref at system scope; HIP = __hip_atomic_* at
// system scope (the proxy is a host thread).
#pragma once

#include <cstdint>

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <sched.h>

#include <chrono>
#endif

#include "impls/channel/command.hpp"
#include "reference/common/host_device.hpp"

#if defined(__CUDA_ARCH__)
#include <cuda/atomic>
#endif

namespace eps::channel {

// The shared part of a FIFO: counters on their own cache lines.
struct FifoHeader {
  alignas(64) std::uint64_t head = 0;  // next index a producer claims (when producers claim here, FifoView)
  alignas(64) std::uint64_t tail = 0;  // next index the proxy pops; written by the proxy only
  alignas(64) std::uint32_t closed = 0;
};

// A FIFO as both sides see it: the header, `capacity` slots (a power of two) and the claim counter `head`.
// Host producers claim in the header (&header->head). A GPU's producers claim in a word of the GPU's own
// memory: a GPU behind PCIe may not apply system-scope atomics to pinned host memory (compute-sanitizer
// reports them as invalid on an H100; the device attribute hostNativeAtomicSupported is 0 there), and
// only producers ever touch the counter, so it lives where their atomics are native. Slots, tail and
// `closed` stay in host memory: producers only load and store them.
struct FifoView {
  FifoHeader* header = nullptr;
  Command* slots = nullptr;
  std::uint32_t capacity = 0;
  std::uint64_t* head = nullptr;
};

namespace fifo_atomics {

EPS_HD inline std::uint64_t fetch_add(std::uint64_t* p, std::uint64_t v) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*p).fetch_add(v,
                                                                                  cuda::memory_order_relaxed);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

template <typename T>
EPS_HD inline T load_acquire(T* p) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<T, cuda::thread_scope_system>(*p).load(cuda::memory_order_acquire);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

template <typename T>
EPS_HD inline void store_release(T* p, T v) {
#if defined(__CUDA_ARCH__)
  cuda::atomic_ref<T, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_release);
#elif defined(__HIP_DEVICE_COMPILE__)
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

template <typename T>
EPS_HD inline void store_relaxed(T* p, T v) {
#if defined(__CUDA_ARCH__)
  cuda::atomic_ref<T, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_relaxed);
#elif defined(__HIP_DEVICE_COMPILE__)
  __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

template <typename T>
EPS_HD inline T load_relaxed(T* p) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<T, cuda::thread_scope_system>(*p).load(cuda::memory_order_relaxed);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

}  // namespace fifo_atomics

enum class PushOutcome : std::uint32_t { kPushed = 0, kGaveUp = 1, kClosed = 2 };

// Nanoseconds of the host's steady clock, for a producer's deadline; 0 on a device (a device producer's wait
// is bounded by its number of polls instead).
EPS_HD inline std::int64_t producer_clock_ns() {
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
#else
  return 0;
#endif
}

// Between polls of a full ring: a host thread gives its core away now and then (host producers and the proxy
// may share cores); a warp just polls again.
EPS_HD inline void producer_backoff(std::uint64_t polls) {
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  if (polls % 64 == 0) sched_yield();
#else
  (void)polls;
#endif
}

// One producer's view: its cached tail (docs/channel.md 7.3: producers cache the tail).
struct FifoProducer {
  FifoView fifo;
  std::uint64_t cached_tail = 0;
};

// Claims a slot and publishes `command` (word 0 must be nonzero). While the ring is full, `keep_waiting()` is
// asked between polls of the tail: false gives up (kGaveUp) with the claimed index unpublished, which leaves
// the FIFO stuck at that index; callers treat it as fatal for the channel (the deadline of docs/errors.md
// 10).
template <typename KeepWaiting>
EPS_HD inline PushOutcome fifo_push(FifoProducer& producer, const Command& command,
                                    KeepWaiting&& keep_waiting) {
  using namespace fifo_atomics;
  const FifoView& f = producer.fifo;
  const std::uint64_t index = fetch_add(f.head, std::uint64_t{1});
  while (index - producer.cached_tail >= f.capacity) {
    producer.cached_tail = load_acquire(&f.header->tail);
    if (index - producer.cached_tail < f.capacity) break;
    if (load_relaxed(&f.header->closed) != 0) return PushOutcome::kClosed;
    if (!keep_waiting()) return PushOutcome::kGaveUp;
  }
  // Words 1-3 are plain stores: only the release store of word 0 orders them (ThreadSanitizer checks this).
  Command* slot = f.slots + (index & (f.capacity - 1));
  slot->word[1] = command.word[1];
  slot->word[2] = command.word[2];
  slot->word[3] = command.word[3];
  store_release(&slot->word[0], command.word[0]);
  return PushOutcome::kPushed;
}

// The proxy's side (host only): pops in index order, publishes the tail after each batch.
class FifoConsumer {
 public:
  FifoConsumer() = default;
  explicit FifoConsumer(FifoView fifo) : fifo_(fifo), tail_(fifo.header->tail) {}

  // Copies the command at the tail into `out` and frees its slot; false when the slot is not published yet.
  bool try_pop(Command& out) {
    using namespace fifo_atomics;
    Command* slot = fifo_.slots + (tail_ & (fifo_.capacity - 1));
    const std::uint32_t word0 = load_acquire(&slot->word[0]);
    if (word0 == 0) return false;
    out.word[0] = word0;
    for (int w = 1; w < 4; ++w) {
      out.word[w] = slot->word[w];
      slot->word[w] = 0;
    }
    store_relaxed(&slot->word[0], 0u);
    ++tail_;
    ++unpublished_;
    return true;
  }
  // Makes every slot popped so far reusable by producers (release store of the tail).
  void publish_tail() {
    if (unpublished_ == 0) return;
    fifo_atomics::store_release(&fifo_.header->tail, tail_);
    unpublished_ = 0;
  }
  std::uint64_t tail() const { return tail_; }
  const FifoView& view() const { return fifo_; }

 private:
  FifoView fifo_;
  std::uint64_t tail_ = 0;
  std::uint64_t unpublished_ = 0;
};

}  // namespace eps::channel
