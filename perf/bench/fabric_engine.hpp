// The machinery of `epsuite bench fabric` (perf/bench/op_fabric.cpp): rank pairing, the byte pattern every
// put carries, puts with completion counting (PutEngine) and the shared-memory copy that is the host's limit
// (CopyEngine).
//
// Pairing: rank r puts to put_peer(r) = (r + R/2) % R (pairs across the halves when R is even; a ring when R
// is odd; R = 1 puts to itself), so every rank receives from exactly one rank, put_source(r). The latency
// ping-pong pairs r with ping_partner(r) = r + R/2 for r < R/2 (and back); with odd R the last rank pings
// itself. Put i of a window goes from source slot i % slots to destination slot i % slots, slots =
// window_slots(size, window) (at most kRegionCapBytes per region), so large sizes reuse memory the way
// perftest does.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "impls/fabric/fabric.hpp"
#include "impls/runtime/deadline.hpp"
#include "reference/common/status.hpp"

namespace eps {
namespace bench_fabric {

// The largest region (per rank, source and destination each) a size may use: slots shrink above it.
inline constexpr std::size_t kRegionCapBytes = std::size_t{64} << 20;

int put_peer(int rank, int ranks);      // (rank + ranks / 2) % ranks
int put_source(int rank, int ranks);    // the rank r with put_peer(r) == rank
int ping_partner(int rank, int ranks);  // rank + R/2, rank - R/2, or rank itself (odd R, last rank)
// Destination slots of a window of puts of `bytes`: min(window, max(1, kRegionCapBytes / bytes)).
std::size_t window_slots(std::size_t bytes, int window);

// The byte that `writer` puts at `offset` of a region: Philox4x32-10 keyed by `seed`, counter
// {offset / 16 (low, high words), writer, 0xfab0}, byte offset % 16 of the block (little endian).
std::uint8_t pattern_byte(std::uint64_t seed, int writer, std::size_t offset);
// out[i] = pattern_byte(seed, writer, offset + i).
void fill_pattern(std::uint64_t seed, int writer, std::size_t offset, std::span<std::byte> out);
// out[i] = ~pattern_byte(seed, writer, offset + i): every byte differs from the expected one.
void fill_poison(std::uint64_t seed, int writer, std::size_t offset, std::span<std::byte> out);

struct WrongBytes {
  std::int64_t count = 0;
  std::optional<std::size_t> first_offset;  // offset (relative to `offset`) of the first wrong byte
  std::uint8_t expected = 0;
  std::uint8_t got = 0;
};
// Compares `data` with fill_pattern(seed, writer, offset, ...).
WrongBytes count_wrong(std::uint64_t seed, int writer, std::size_t offset, std::span<const std::byte> data);

// wait_until without its sleeping phase: a 50 us sleep would be measured as fabric time. Yielding keeps an
// oversubscribed peer (the one that must drive progress) running.
Status spin_until(const Deadline& deadline, const std::function<bool()>& predicate,
                  const std::function<std::string()>& describe);

// Puts from this rank's source region to a peer's destination region and their completions, counted
// cumulatively so that a phase waits for "everything posted so far".
class PutEngine {
 public:
  PutEngine(fabric::Fabric& f, fabric::Region src, fabric::Region dst, double timeout_seconds)
      : fabric_(f), src_(src), dst_(dst), timeout_seconds_(timeout_seconds) {}

  fabric::Fabric& fabric() { return fabric_; }
  std::span<std::byte> src() const { return src_.local; }
  std::span<std::byte> dst() const { return dst_.local; }

  Status barrier() { return fabric_.barrier(Deadline(timeout_seconds_)); }
  // Posts put `slot` of `bytes` to `peer`, retrying under backpressure while polling.
  Status post(int peer, std::size_t bytes, std::size_t slot, bool with_imm, const Deadline& deadline);
  // Waits until every put posted so far has its local completion and `remote` immediates have arrived in
  // total since the engine was made.
  Status wait(std::int64_t remote, int peer, const Deadline& deadline);
  // Only the immediates (the latency responder and initiator do not wait for their local completions).
  Status wait_remote(std::int64_t remote, int peer, const Deadline& deadline);
  std::int64_t remote_seen() const { return remote_seen_; }

 private:
  // Immediates count up and never set both top bits (kImmReservedKind is the fabric barrier's).
  std::uint32_t next_imm() { return imm_++ & ((std::uint32_t{1} << fabric::kImmKindShift) - 1); }
  Status drain();

  fabric::Fabric& fabric_;
  fabric::Region src_;
  fabric::Region dst_;
  double timeout_seconds_;
  std::array<fabric::Completion, 64> completions_{};
  std::int64_t posted_ = 0;
  std::int64_t local_done_ = 0;
  std::int64_t remote_seen_ = 0;
  std::uint32_t imm_ = 0;
};

// The shared-memory copy: one MPI_Win_allocate_shared segment per rank of this node (a flag page, then the
// data), written by the node-local put_source with memcpy and a release flag.
class CopyEngine {
 public:
  static constexpr std::size_t kHeaderBytes = 4096;

  CopyEngine() = default;
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;
  ~CopyEngine();

  // Collective over MPI_COMM_WORLD: segments of `bytes`, the peer's mapped, the source's world rank known.
  Status start(std::size_t bytes, const Deadline& deadline);
  std::span<std::byte> data() const { return data_; }
  int source_world_rank() const { return source_world_rank_; }
  // This rank's time (µs): memcpy a window of `bytes` messages into the peer's segment, set its flag, wait
  // for our own flag.
  Result<double> iteration(std::span<const std::byte> src, std::size_t bytes, int window,
                           double timeout_seconds);

 private:
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  double timeout_seconds_ = kDefaultTimeoutSeconds;
  int node_rank_ = 0;
  int node_size_ = 1;
  int source_world_rank_ = 0;
  std::atomic<std::uint64_t>* flag_ = nullptr;
  std::atomic<std::uint64_t>* peer_flag_ = nullptr;
  std::span<std::byte> data_;
  std::byte* peer_data_ = nullptr;
  std::uint64_t iteration_ = 0;
};

}  // namespace bench_fabric
}  // namespace eps
