// FabricBase: what every concrete fabric shares, so that a backend only moves bytes.
//
// A backend (libfabric, verbs, shm) derives from FabricBase and implements four hooks:
// - `create_region(id, bytes, memory)`: collective; allocate (zero-filled) and register `bytes` of memory, or
//   register the caller's `memory` (adopt), and do whatever exchange makes the peers' regions with this id
//   writable (keys, addresses, segment names).
// - `post(op)`: issue one validated put; false = the provider is out of resources (EAGAIN), nothing posted.
// - `backend_atomic_support()`: ok when the backend has remote 64-bit atomic adds here, else
//   no_remote_atomics(name, reason); `post_atomic(op)`: issue one validated atomic add, like post. Its kLocal
//   completion (op.context) must mean the add is applied at the target.
// - `progress(sink)`: drive the provider and append every new completion (kLocal with the put's context,
//   kRemote with the immediate) to `sink`; never blocks.
// - `backend_name()`, `backend_describe()`, `backend_ordered()`, `backend_limits()`.
//
// FabricBase provides the rest of the Fabric contract (fabric.hpp): argument checks with one clear message
// per field, the outstanding count of puts and atomics and backpressure at limits().max_outstanding_puts,
// `quiet` by counting (docs/channel.md 7.2), a stash so that completions drained by quiet or barrier reach
// the next poll, and a dissemination barrier carried by the fabric itself (reserved immediates;
// docs/fabrics.md 6.1 `barrier`).
//
// Barrier immediates: bits 31-30 = 0b11 (kImmReservedKind), bits 29-24 = round j (message from rank - 2^j),
// bits 7-0 = barrier sequence mod 256. A rank is never more than one barrier ahead of a peer, so the
// 8-bit sequence wraps safely; conformance/fabric runs more than 256 barriers to prove it.
//
// Construction: the factory duplicates the caller's communicator (so the fabric's collectives never match
// the caller's), builds the backend with it (FabricBase frees it) and calls `start()` (collective), which
// creates the barrier's internal region as backend index 0; caller regions 0, 1, ... are backend indices
// 1, 2, ... (region_index).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "impls/fabric/fabric.hpp"

namespace eps::fabric {

inline constexpr int kBarrierSeqBits = 8;
inline constexpr std::uint64_t kBarrierContext = ~std::uint64_t{0};

// Barrier immediate of round `round` and sequence `seq` (mod 2^kBarrierSeqBits), and its fields.
std::uint32_t barrier_imm(int round, std::uint32_t seq);
bool is_barrier_imm(std::uint32_t imm);
int barrier_imm_round(std::uint32_t imm);
std::uint32_t barrier_imm_seq(std::uint32_t imm);

class FabricBase : public Fabric {
 public:
  FabricBase(MPI_Comm comm, double timeout_seconds);
  ~FabricBase() override;

  // Collective; call once from the factory after construction.
  Status start();

  std::string name() const final { return backend_name(); }
  std::string describe() const final { return backend_describe(); }
  bool ordered() const final { return backend_ordered(); }
  int rank() const final { return rank_; }
  int size() const final { return size_; }
  FabricLimits limits() const final { return backend_limits(); }

  Result<Region> allocate(std::size_t bytes) final;
  Result<Region> adopt(std::span<std::byte> memory) final;
  Status validate(const PutOp& op) const final { return check_put(op); }
  Result<bool> try_put(const PutOp& op) final;
  Status atomic_support() const final { return backend_atomic_support(); }
  Status validate(const AtomicOp& op) const final { return check_atomic(op); }
  Result<bool> try_atomic_add(const AtomicOp& op) final;
  Result<std::size_t> poll(std::span<Completion> out) final;
  Status quiet(const Deadline& deadline) final;
  Status flush(const Deadline&) final { return Status(); }  // puts are posted at once
  Status barrier(const Deadline& deadline) final;

 protected:
  // Backend hooks (see the header comment). `id` is the backend's region index: 0 is the barrier region,
  // caller region c is backend index c + 1 (region_index). PutOps passed to post() use backend indices.
  // `memory` null: allocate `bytes` zero-filled; otherwise register the caller's memory of that size.
  virtual Result<std::span<std::byte>> create_region(int id, std::size_t bytes, std::byte* memory) = 0;
  virtual Result<bool> post(const PutOp& op) = 0;
  // AtomicOps passed to post_atomic use backend region indices and were checked (check_atomic).
  virtual Status backend_atomic_support() const = 0;
  virtual Result<bool> post_atomic(const AtomicOp& op) = 0;
  virtual Status progress(std::vector<Completion>& sink) = 0;
  virtual std::string backend_name() const = 0;
  virtual std::string backend_describe() const = 0;
  virtual bool backend_ordered() const = 0;
  virtual FabricLimits backend_limits() const = 0;

  static int region_index(int caller_id) { return caller_id + 1; }
  // The bytes rank `rank` allocated for backend region `index` (0 when there is no such region).
  std::size_t region_bytes(int index, int rank) const;
  MPI_Comm comm() const { return comm_; }
  double timeout_seconds() const { return timeout_seconds_; }

 private:
  struct RegionInfo {
    std::span<std::byte> local;
    std::vector<std::size_t> sizes;  // per rank
  };
  Result<int> create(std::size_t bytes, std::byte* memory);
  Status check_put(const PutOp& op) const;
  Status check_atomic(const AtomicOp& op) const;
  Status drain();  // progress() into the stash, counting local completions and barrier arrivals
  // Posts through `post_once` (a put or an atomic) counting it outstanding; backpressure at the limit.
  template <typename PostOnce>
  Result<bool> post_counted_with(PostOnce&& post_once);
  Result<bool> post_counted(const PutOp& op);

  MPI_Comm comm_ = MPI_COMM_NULL;
  double timeout_seconds_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<RegionInfo> regions_;  // backend indices
  std::deque<Completion> stash_;
  std::vector<Completion> scratch_;
  std::int64_t outstanding_ = 0;
  std::uint32_t barrier_seq_ = 0;
  // arrivals_[seq mod 256][round]: barrier messages received and not yet consumed.
  std::vector<std::vector<int>> arrivals_;
};

}  // namespace eps::fabric
