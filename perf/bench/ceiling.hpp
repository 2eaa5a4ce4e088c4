// The machine's ceiling next to every bench row (docs/results.md 9.4): the time the same bytes take between
// the same ranks when nothing but memcpy moves them, measured in the same run with the same timer and
// iteration policy as the row (a second Measurement of the point: -w/-n, barrier before each iteration, time
// = max over ranks, p50).
//
// The pieces:
// - ByteMatrix: bytes[src][dst] that one iteration of the row moves from rank src to rank dst, in world
//   ranks, rows a rank sends to itself included (docs/dispatch.md 5.6 `algo`).
// - transport_bytes: the matrix of a transport op (dispatch, combine or both) from every rank's routing. HT
//   rank-major moves one row per (r, t, q ∈ dst_ranks(r, t)); expert-major and LL one message per valid
//   selection, to the rank its slot is placed on; combine the same units back at 2H bytes each.
// - received_evenly: the matrix of an op that only counts each rank's received bytes (the layer: wire bytes
//   over the stack). Rank q's bytes are split evenly over the other ranks (remainder to the lowest ones), or
//   are its own when it is alone.
// - copy_plan: what one rank copies. Every destination with bytes, in the order rank + 1, rank + 2, ...
//   (mod R), itself last; each block's offset in its source buffer (destinations ascending) and in the
//   destination's receive region (sources ascending); and the sources it waits for.
// - CeilingMeasurement: the shared-memory copy of a matrix. Every rank of a node owns one
//   MPI_Win_allocate_shared segment: one flag per node rank on its own 64-byte line, then its receive region.
//   An iteration memcpy's every planned block into the destination's region and sets this rank's flag there
//   (release), then waits until every source's flag in its own segment shows this iteration. All ranks copy
//   at once, like the op.
//
// Kind: "shm-copy" when every rank of the run shares one node (the ops check mpi::node_layout). Ranks on
// several nodes cannot copy through shared memory: their rows carry the "fabric" ceiling instead
// (fabric_ceiling.hpp: the same matrix as raw puts of the run's fabric), which `--ceiling fabric` also
// selects on one node. A matrix with a pair on two nodes given to CeilingMeasurement is refused
// (kInvalidArgument naming the pair).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "impls/fabric/fabric_selection.hpp"
#include "perf/bench/bench_op.hpp"
#include "reference/dispatch/dispatch_plan.hpp"

namespace eps::bench {

inline constexpr const char* kShmCopyCeiling = "shm-copy";
inline constexpr const char* kFabricCeiling = "fabric";  // fabric_ceiling.hpp

// Which ceiling a run measures (--ceiling): auto = shm-copy when every rank is on one node, else fabric;
// shm-copy (refused across nodes, naming the node count), fabric (through --fabric, also on one node, to
// read a transport against its own fabric), none. The result is the kind, or "" for none.
Result<std::string> choose_ceiling(std::string_view flag, int nodes);

// --ceiling of the ops with a ceiling (choose_ceiling).
ParamSpec ceiling_param_spec();

// The echo line of a series' header that says how the ceiling columns were measured (kind "": not measured).
std::pair<std::string, std::string> ceiling_echo(std::string_view kind);

class ByteMatrix {
 public:
  explicit ByteMatrix(int ranks) : ranks_(ranks), bytes_(static_cast<std::size_t>(ranks) * ranks, 0) {}

  int ranks() const { return ranks_; }
  std::int64_t at(int src, int dst) const { return bytes_[index(src, dst)]; }
  void add(int src, int dst, std::int64_t bytes) { bytes_[index(src, dst)] += bytes; }
  std::int64_t sent_by(int src) const;      // Σ_dst bytes[src][dst]
  std::int64_t received_by(int dst) const;  // Σ_src bytes[src][dst]
  friend bool operator==(const ByteMatrix&, const ByteMatrix&) = default;

 private:
  std::size_t index(int src, int dst) const { return static_cast<std::size_t>(src) * ranks_ + dst; }
  int ranks_;
  std::vector<std::int64_t> bytes_;
};

// Which traffic of docs/dispatch.md 5.6 a row's time covers.
struct TrafficOf {
  bool dispatch = false;
  bool combine = false;
};

// The matrix of a transport op. `per_selection`: expert-major and LL layouts (one unit per valid selection);
// otherwise HT rank-major (one row per destination rank of a token).
ByteMatrix transport_bytes(const dispatch::DispatchPlan& plan, bool per_selection, TrafficOf parts);

// The matrix of an op that only knows each rank's received bytes (`received[q]`, one entry per rank).
ByteMatrix received_evenly(std::span<const std::int64_t> received);

struct CopyBlock {
  int peer = 0;                 // destination rank
  std::int64_t src_offset = 0;  // in this rank's source buffer
  std::int64_t dst_offset = 0;  // in the destination's receive region
  std::int64_t bytes = 0;
  friend bool operator==(const CopyBlock&, const CopyBlock&) = default;
};

struct CopyPlan {
  std::vector<CopyBlock> blocks;  // in copy order
  std::vector<int> sources;       // ranks that copy into this rank (bytes > 0), ascending
  std::int64_t send_bytes = 0;    // Σ blocks' bytes: the source buffer
  std::int64_t recv_bytes = 0;    // Σ_src bytes[src][rank]: the receive region
  friend bool operator==(const CopyPlan&, const CopyPlan&) = default;
};

CopyPlan copy_plan(const ByteMatrix& matrix, int rank);
// Where `src`'s block lands in `dst`'s receive region: Σ_{s < src} bytes[s][dst].
std::int64_t receive_offset(const ByteMatrix& matrix, int src, int dst);
// Where `dst`'s block starts in `src`'s source buffer: Σ_{d < dst} bytes[src][d].
std::int64_t source_offset(const ByteMatrix& matrix, int src, int dst);

// The -c side of a ceiling, on rank `rank`'s receive region (each source's block at its receive_offset):
// poison_received fills every block with its source's poison for `seed`; check_received counts the bytes
// that differ from the sources' pattern and names the first ("<what> byte B from rank S: ...").
void poison_received(const ByteMatrix& matrix, const CopyPlan& plan, int rank, std::uint64_t seed,
                     std::span<std::byte> region);
Mismatches check_received(const ByteMatrix& matrix, const CopyPlan& plan, int rank, std::uint64_t seed,
                          std::span<const std::byte> region, std::string_view what);

// Shared-memory copy of a matrix (see the top of this header). The matrix comes from `make_matrix`, called on
// the first prepare (after the row's own measurement, so an op that learns its bytes while it runs, like the
// layer, can give them); that first prepare and the destructor are collective over MPI_COMM_WORLD. With -c
// every iteration's source bytes are the writer's bench fabric pattern (seed + iteration, offset in its
// source buffer), the receive region is poisoned before it, and check() counts the bytes that differ.
class CeilingMeasurement final : public MachineCeiling {
 public:
  CeilingMeasurement(std::function<Result<ByteMatrix>()> make_matrix, std::uint64_t seed, double timeout);
  CeilingMeasurement(const CeilingMeasurement&) = delete;
  CeilingMeasurement& operator=(const CeilingMeasurement&) = delete;
  ~CeilingMeasurement() override;

  Status prepare(int iteration, bool checking) override;
  Result<double> run(int iteration) override;
  Result<Mismatches> check(int iteration) override;

  const std::string& kind() const override { return kind_; }

 private:
  Status start();
  Status map_node_segments();
  std::atomic<std::uint64_t>* flag_of(int world_rank, int writer_world_rank) const;
  std::byte* region_of(int world_rank) const;
  std::span<std::byte> received() const;  // this rank's receive region
  std::uint64_t seed_of(int iteration) const { return seed_ + static_cast<std::uint64_t>(iteration); }
  void fill_source(int iteration);

  std::function<Result<ByteMatrix>()> make_matrix_;
  std::uint64_t seed_;
  double timeout_;
  std::optional<ByteMatrix> matrix_;
  CopyPlan plan_;
  std::string kind_ = kShmCopyCeiling;
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  std::vector<int> node_rank_of_;     // [world rank] -> node rank, -1 when on another node
  std::vector<std::byte*> segments_;  // [node rank] -> that rank's segment
  std::size_t header_bytes_ = 0;
  std::vector<std::byte> source_;
  int filled_for_ = -1;  // the iteration whose pattern source_ holds (-1: none yet)
  std::uint64_t iteration_id_ = 0;
};

// The ceiling `kind` (choose_ceiling) of a point whose bytes `make_matrix` gives; null for "".
std::unique_ptr<MachineCeiling> make_machine_ceiling(std::string_view kind,
                                                     std::function<Result<ByteMatrix>()> make_matrix,
                                                     const fabric::FabricSelection& selection,
                                                     std::uint64_t seed, double timeout);

}  // namespace eps::bench
