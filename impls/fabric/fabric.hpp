// The Fabric interface: one-sided puts with 32-bit immediates, and remote 64-bit atomic adds, between the
// ranks of an MPI communicator (docs/fabrics.md 6.1). Backends: libfabric/ (FI_EP_RDM + FI_RMA), verbs/ (RC
// write-with-immediate, EFA SRD via efadv), shm/ (puts into peers' shared-memory segments) and chaos/ (a
// decorator that reorders, splits, delays and withholds, docs/fabrics.md 6.3). Each backend registers itself
// by name (fabric_registry.hpp).
//
// Contract (every backend; conformance/fabric checks it):
//
// Ranks and regions. A fabric spans the ranks of `FabricConfig::comm`. `allocate(bytes)` is collective:
// every rank allocates `bytes` (the value may differ per rank) of remotely writable host memory, zero-
// filled, and gets a Region whose `id` is the same on every rank (ids count 0, 1, 2, ... in allocation
// order). Puts name the target memory by (region id, offset) on the peer; the local source is a
// (region id, offset) of this rank, so that providers needing local registration (FI_MR_LOCAL, verbs
// lkeys) always have it. Regions live as long as the fabric.
//
// Puts. `try_put(op)` posts one put of op.bytes from this rank's (local_region, local_offset) to the
// peer's (remote_region, remote_offset), optionally carrying a 32-bit immediate (docs/fabrics.md 6.1: at most
// 32 bits even where a provider offers more). It returns true when posted, false under backpressure (the
// caller must poll and try again; nothing was posted), or an error: kInvalidArgument for a bad peer,
// region, offset range or size (naming the field and its allowed range), kEnvironment for a provider
// failure. The local source may be reused once its local completion has been returned. A put to this
// rank itself is allowed and behaves like any other.
//
// Completions. `poll(out)` drives progress and returns up to out.size() completions without blocking:
// - kLocal (one per posted put, carrying op.context): the put is complete at the target, i.e. its bytes
//   are placed in the target's memory (delivery-complete semantics; sender-barrier relies on it, 6.2).
// - kRemote (one per put that carried an immediate, at the target, carrying the immediate): the put's
//   bytes are placed. Puts without an immediate produce no remote completion.
// Callers must poll regularly, also while only waiting on memory: some providers place data only while
// the target drives progress.
//
// Ordering. `ordered()` is true when puts from one initiator to one target are placed, and their remote
// completions delivered, in issue order (verbs RC, libfabric with FI_ORDER_WAW and ordered CQ data, shm);
// false otherwise (EFA SRD, the chaos decorator). Nothing orders puts of different initiators.
//
// Quiet, flush and barrier. `quiet(deadline)` returns once every put this rank posted before the call has its
// local completion; it counts outstanding puts (docs/channel.md 7.2) and keeps every completion it drains for
// later poll calls, so none is lost. `barrier(deadline)` is collective over the fabric's ranks and is itself
// carried by the fabric (puts with reserved immediates, see kImmReservedKind); its completions never reach
// the caller. Every wait has a deadline (docs/errors.md 10): expiry returns kEnvironment naming what was
// awaited.
//
// Immediates whose two top bits are both set (kImmReservedKind) are reserved for the fabric's own barrier;
// try_put refuses them from callers.
//
// Load/store access and stream-ordered receive (docs/fabrics.md 6.5). `peer_memory(peer, region)` is the
// peer's memory of a region as mapped into this rank, where the fabric maps it at all (shm: the peer's
// segment; ipc: the peer's device memory, imported): a kernel or copy of this rank may then write a peer's
// region directly (pack straight into the receive buffer). Empty where peers' memory is reached only
// through the NIC, and under the chaos decorator (which must see every write). `region_device()` is the
// device whose kDevice memory holds the regions (Region::local and peer_memory point there), or null when
// they are host memory the host may touch: where it is a device the host cannot address (a GPU,
// cpu-isolated), the caller reads and writes region bytes through that device's copies only.
// `enqueue_wait_for_immediates(queue, peer, count, timeout)` enqueues on `queue` (of region_device()) a
// device wait until this rank has received at least `count` caller immediates from `peer` since the
// fabric was made (barrier immediates do not count), so that later work on that queue (an unpack kernel)
// runs after those puts' bytes without the host polling; kUnavailable where the fabric has no such signal.
//
// Remote atomics. `try_atomic_add(op)` adds op.value (mod 2^64) to the 64-bit word at the peer's
// (remote_region, remote_offset); the offset must be a multiple of 8 (kAtomicBytes) and the word must lie
// within the peer's region. The add is atomic with respect to every other atomic add of this fabric to that
// word, whichever rank issued it (a rank may add to its own memory too); plain puts to the same word, or
// CPU stores there, are not atomic with it. Results are as for try_put: true posted, false backpressure
// (nothing posted), kInvalidArgument naming the field ("atomic.peer", "atomic.remote_region",
// "atomic.remote_offset") and its allowed range. An atomic has no local source and no immediate. Its kLocal
// completion (carrying op.context) means the add is applied at the target, so a target that reads the word
// after learning of that completion (e.g. after a barrier) sees it. Atomics count like puts towards
// limits().max_outstanding_puts, quiet() and flush(). Ordering: on an ordered() fabric an atomic is applied
// after every earlier put and atomic of the same initiator to the same target is placed, so a target that
// sees the atomic's effect sees those puts' bytes too; on an unordered fabric nothing orders an atomic
// against other operations. The target reads an atomically updated word with an atomic 64-bit load
// (load_atomic_u64): a plain load may tear or be hoisted out of a wait loop. `atomic_support()` says whether
// this fabric has remote atomics at all: a backend that genuinely cannot (EFA SRD, a provider without
// FI_ATOMIC) returns kUnavailable "no remote atomics on <fabric>: <reason>" there and from validate and
// try_atomic_add (no_remote_atomics below).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "impls/runtime/deadline.hpp"
#include "reference/common/status.hpp"

namespace eps::device {
class Device;
class Queue;
}  // namespace eps::device

namespace eps::fabric {

// The largest put any fabric accepts: byte counts travel in 24-bit fields (command channel,
// docs/channel.md 7.1).
inline constexpr std::size_t kMaxPutBytes = (std::size_t{1} << 24) - 1;
// Immediates with both top bits set are the fabric barrier's (see above).
inline constexpr std::uint32_t kImmReservedKind = 3;
inline constexpr int kImmKindShift = 30;

struct Region {
  int id = -1;
  std::span<std::byte> local;  // this rank's memory of the region
};

struct PutOp {
  int peer = 0;  // target rank in [0, size)
  int local_region = 0;
  std::size_t local_offset = 0;
  int remote_region = 0;
  std::size_t remote_offset = 0;
  std::size_t bytes = 0;  // [0, max_put_bytes]; 0 only together with an immediate
  std::optional<std::uint32_t> imm;
  std::uint64_t context = 0;  // returned in the put's local completion
};

// Remote atomics add to 64-bit words at 8-byte aligned offsets.
inline constexpr std::size_t kAtomicBytes = 8;

struct AtomicOp {
  int peer = 0;  // target rank in [0, size)
  int remote_region = 0;
  std::size_t remote_offset = 0;  // a multiple of kAtomicBytes; the word lies within the peer's region
  std::uint64_t value = 0;        // added modulo 2^64
  std::uint64_t context = 0;      // returned in the atomic's local completion
};

// The refusal of a fabric without remote atomics: kUnavailable "no remote atomics on <fabric>: <reason>".
inline Status no_remote_atomics(std::string_view fabric, std::string_view reason) {
  return Status(StatusCode::kUnavailable, fmt::format("no remote atomics on {}: {}", fabric, reason));
}

// How a rank reads a word that remote atomics update (offset a multiple of kAtomicBytes, region memory
// 8-byte aligned as every fabric's is): an acquire load, so it neither tears nor is hoisted out of a wait
// loop, and what the word's atomic made visible (the earlier puts on an ordered fabric) is seen after it.
inline std::uint64_t load_atomic_u64(std::span<const std::byte> region, std::size_t offset) {
  auto* word = reinterpret_cast<std::uint64_t*>(const_cast<std::byte*>(region.data() + offset));
  return std::atomic_ref<std::uint64_t>(*word).load(std::memory_order_acquire);
}

enum class CompletionKind { kLocal, kRemote };

struct Completion {
  CompletionKind kind = CompletionKind::kLocal;
  std::uint64_t context = 0;  // kLocal: the put's (or atomic's) context
  std::uint32_t imm = 0;      // kRemote: the put's immediate
};

struct FabricLimits {
  std::size_t max_put_bytes = kMaxPutBytes;
  // Posted puts and atomics without a local completion before try_put / try_atomic_add say false.
  int max_outstanding_puts = 1024;
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  // The --fabric name: "shm", "libfabric:tcp", "chaos(libfabric:shm)".
  virtual std::string name() const = 0;
  // One line for tables and errors: provider, version, ordering; the chaos decorator adds the replay
  // string (--chaos seed=S,...) and its schedule id.
  virtual std::string describe() const = 0;
  virtual bool ordered() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual FabricLimits limits() const = 0;
  // How the fabric's regions reach the NIC (results `staging`, docs/devices.md "Memory kinds"): "none" for
  // host memory the fabric maps itself; with FabricConfig::memory_device, "fi-hmem:<iface>" when the regions
  // are that device's memory registered directly, "dma-buf" when registered through an exported dma-buf, or
  // "host-staging: <reason>" when the regions stayed host memory and the caller stages through them.
  virtual std::string memory_registration() const { return "none"; }

  virtual Result<Region> allocate(std::size_t bytes) = 0;
  // Registers memory the caller owns (and keeps alive as long as the fabric) as a region, collectively like
  // allocate: the same id on every rank, sizes may differ, the content is kept. This is how two fabrics share
  // one buffer (the `auto` fabric registers the shm segment with the inter-node fabric). A backend that can
  // only write into memory it maps itself (shm) returns kInvalidArgument.
  virtual Result<Region> adopt(std::span<std::byte> memory) = 0;
  // The argument checks of try_put without posting (decorators validate before holding a put back).
  virtual Status validate(const PutOp& op) const = 0;
  virtual Result<bool> try_put(const PutOp& op) = 0;
  // Remote 64-bit atomic add (see the header comment): ok, or kUnavailable from no_remote_atomics.
  virtual Status atomic_support() const = 0;
  // The argument checks of try_atomic_add without posting (kUnavailable first where atomic_support() is).
  virtual Status validate(const AtomicOp& op) const = 0;
  virtual Result<bool> try_atomic_add(const AtomicOp& op) = 0;
  virtual Result<std::size_t> poll(std::span<Completion> out) = 0;
  virtual Status quiet(const Deadline& deadline) = 0;
  // Hands every put posted so far to the provider without waiting for completions: a layer that holds
  // puts back (the chaos decorator) releases them all, polling as it must; concrete fabrics, which post
  // at once, return at once. Call it before a stretch without polling while peers may wait for those puts.
  virtual Status flush(const Deadline& deadline) = 0;
  virtual Status barrier(const Deadline& deadline) = 0;

  // docs/fabrics.md 6.5 (the header comment): a peer's region as mapped here (empty: not mapped), the device
  // of the regions' memory (null: host memory), and the stream-ordered wait for a peer's immediates.
  virtual std::span<std::byte> peer_memory(int /*peer*/, int /*region*/) const { return {}; }
  virtual device::Device* region_device() const { return nullptr; }
  virtual Status enqueue_wait_for_immediates(device::Queue& /*queue*/, int /*peer*/, std::uint64_t /*count*/,
                                             double /*timeout_seconds*/) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("{}: no stream-ordered receive (its immediates reach the host only)", name()));
  }
};

}  // namespace eps::fabric
