#include "perf/bench/ceiling.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "impls/runtime/mpi_runtime.hpp"
#include "perf/bench/fabric_ceiling.hpp"
#include "perf/bench/fabric_engine.hpp"
#include "reference/dispatch/byte_accounting.hpp"

namespace eps::bench {
namespace {

// One flag per node rank, each on its own cache line so that writers do not share a line.
constexpr std::size_t kFlagStride = 64;
constexpr std::size_t kPageBytes = 4096;

std::size_t round_up(std::size_t value, std::size_t unit) { return (value + unit - 1) / unit * unit; }

}  // namespace

std::int64_t ByteMatrix::sent_by(int src) const {
  std::int64_t sum = 0;
  for (int dst = 0; dst < ranks_; ++dst) sum += at(src, dst);
  return sum;
}

std::int64_t ByteMatrix::received_by(int dst) const {
  std::int64_t sum = 0;
  for (int src = 0; src < ranks_; ++src) sum += at(src, dst);
  return sum;
}

ByteMatrix transport_bytes(const dispatch::DispatchPlan& plan, bool per_selection, TrafficOf parts) {
  ByteMatrix m(plan.num_ranks());
  const dispatch::PayloadType dtype = plan.config().dtype;
  const std::int64_t dispatch_unit = dispatch::ht_dispatch_row_bytes(dtype, plan.hidden());
  const std::int64_t combine_unit = dispatch::combine_row_bytes(plan.hidden());
  auto move = [&](int source, int expert_rank) {
    if (parts.dispatch) m.add(source, expert_rank, dispatch_unit);
    if (parts.combine) m.add(expert_rank, source, combine_unit);
  };
  for (int r = 0; r < plan.num_ranks(); ++r) {
    for (int t = 0; t < plan.num_tokens(r); ++t) {
      if (!per_selection) {
        for (int q : plan.dst_ranks(r, t)) move(r, q);
        continue;
      }
      for (int k = 0; k < plan.top_k(); ++k) {
        const int q = plan.placement(r, t, k).rank;
        if (q >= 0) move(r, q);
      }
    }
  }
  return m;
}

ByteMatrix received_evenly(std::span<const std::int64_t> received) {
  const int ranks = static_cast<int>(received.size());
  ByteMatrix m(ranks);
  for (int q = 0; q < ranks; ++q) {
    if (ranks == 1) {
      m.add(q, q, received[0]);
      continue;
    }
    const std::int64_t share = received[static_cast<std::size_t>(q)] / (ranks - 1);
    std::int64_t left = received[static_cast<std::size_t>(q)] % (ranks - 1);
    for (int s = 0; s < ranks; ++s) {
      if (s == q) continue;
      m.add(s, q, share + (left > 0 ? 1 : 0));
      if (left > 0) --left;
    }
  }
  return m;
}

std::int64_t receive_offset(const ByteMatrix& matrix, int src, int dst) {
  std::int64_t offset = 0;
  for (int s = 0; s < src; ++s) offset += matrix.at(s, dst);
  return offset;
}

std::int64_t source_offset(const ByteMatrix& matrix, int src, int dst) {
  std::int64_t offset = 0;
  for (int d = 0; d < dst; ++d) offset += matrix.at(src, d);
  return offset;
}

CopyPlan copy_plan(const ByteMatrix& matrix, int rank) {
  CopyPlan plan;
  const int ranks = matrix.ranks();
  // Peers first, staggered (rank + 1, rank + 2, ...) so that no destination takes every writer at once; the
  // block to itself last.
  for (int step = 1; step <= ranks; ++step) {
    const int peer = (rank + step) % ranks;
    const std::int64_t bytes = matrix.at(rank, peer);
    if (bytes == 0) continue;
    plan.blocks.push_back(
        {peer, source_offset(matrix, rank, peer), receive_offset(matrix, rank, peer), bytes});
    plan.send_bytes += bytes;
  }
  for (int src = 0; src < ranks; ++src) {
    if (matrix.at(src, rank) > 0) plan.sources.push_back(src);
  }
  plan.recv_bytes = matrix.received_by(rank);
  return plan;
}

namespace {

// Calls visit(src, block of src in region, offset of that block in src's source buffer) per source.
template <typename Byte, typename Visit>
void for_each_received(const ByteMatrix& matrix, const CopyPlan& plan, int rank, std::span<Byte> region,
                       Visit visit) {
  for (int src : plan.sources) {
    const auto offset = static_cast<std::size_t>(receive_offset(matrix, src, rank));
    const auto bytes = static_cast<std::size_t>(matrix.at(src, rank));
    visit(src, region.subspan(offset, bytes), static_cast<std::size_t>(source_offset(matrix, src, rank)));
  }
}

}  // namespace

void poison_received(const ByteMatrix& matrix, const CopyPlan& plan, int rank, std::uint64_t seed,
                     std::span<std::byte> region) {
  for_each_received(matrix, plan, rank, region, [&](int src, std::span<std::byte> block, std::size_t from) {
    bench_fabric::fill_poison(seed, src, from, block);
  });
}

Mismatches check_received(const ByteMatrix& matrix, const CopyPlan& plan, int rank, std::uint64_t seed,
                          std::span<const std::byte> region, std::string_view what) {
  Mismatches found;
  for_each_received(
      matrix, plan, rank, region, [&](int src, std::span<const std::byte> block, std::size_t from) {
        const bench_fabric::WrongBytes wrong = bench_fabric::count_wrong(seed, src, from, block);
        if (wrong.count > 0 && found.count == 0) {
          found.first = fmt::format("{} byte {} from rank {}: expected 0x{:02x}, got 0x{:02x}", what,
                                    *wrong.first_offset, src, wrong.expected, wrong.got);
        }
        found.count += wrong.count;
      });
  return found;
}

ParamSpec ceiling_param_spec() {
  return {.name = "ceiling",
          .kind = ParamKind::kChoice,
          .default_text = "auto",
          .help =
              "The machine's ceiling next to every row (docs/results.md 9.4): shm-copy (memcpy between the "
              "ranks, one node only), fabric (raw puts of --fabric), auto (shm-copy on one node, else "
              "fabric) or none",
          .choices = {"auto", "shm-copy", "fabric", "none"}};
}

Result<std::string> choose_ceiling(std::string_view flag, int nodes) {
  if (flag == "none") return std::string();
  if (flag == "fabric" || (flag == "auto" && nodes > 1)) return std::string(kFabricCeiling);
  if (flag == "auto" || (flag == kShmCopyCeiling && nodes == 1)) return std::string(kShmCopyCeiling);
  if (flag == kShmCopyCeiling) {
    return invalid_argument("--ceiling",
                            "shm-copy needs every rank on one node; this run spans {} nodes "
                            "(use fabric or auto)",
                            nodes);
  }
  return invalid_argument("--ceiling", "must be auto, shm-copy, fabric or none, got '{}'", flag);
}

std::pair<std::string, std::string> ceiling_echo(std::string_view kind) {
  if (kind == kFabricCeiling) {
    return {
        "ceiling",
        "raw puts of the row's bytes between the same ranks through the --fabric below, all ranks at once, "
        "one immediate per pair, same -w/-n, barrier and max over ranks; ratio = ceiling p50 / p50 "
        "(docs/results.md 9.4)"};
  }
  if (kind.empty()) return {"ceiling", "not measured (--ceiling none)"};
  return {
      "ceiling",
      "memcpy of the row's bytes between the same ranks through MPI_Win_allocate_shared segments, all ranks "
      "at once, same -w/-n, barrier and max over ranks; ratio = ceiling p50 / p50 (docs/results.md 9.4)"};
}

std::unique_ptr<MachineCeiling> make_machine_ceiling(std::string_view kind,
                                                     std::function<Result<ByteMatrix>()> make_matrix,
                                                     const fabric::FabricSelection& selection,
                                                     std::uint64_t seed, double timeout) {
  if (kind == kShmCopyCeiling)
    return std::make_unique<CeilingMeasurement>(std::move(make_matrix), seed, timeout);
  if (kind == kFabricCeiling) {
    return std::make_unique<FabricCeilingMeasurement>(std::move(make_matrix), selection, seed, timeout);
  }
  return nullptr;
}

CeilingMeasurement::CeilingMeasurement(std::function<Result<ByteMatrix>()> make_matrix, std::uint64_t seed,
                                       double timeout)
    : make_matrix_(std::move(make_matrix)), seed_(seed), timeout_(timeout) {}

CeilingMeasurement::~CeilingMeasurement() {
  if (window_ != MPI_WIN_NULL) {
    MPI_Win_unlock_all(window_);
    const Status freed = mpi::win_free(&window_, node_, Deadline(timeout_));
    if (!freed.ok()) std::fprintf(stderr, "epsuite: bench ceiling segment: %s\n", freed.message().c_str());
  }
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

Status CeilingMeasurement::start() {
  EPS_ASSIGN_OR_RETURN(ByteMatrix matrix, make_matrix_());
  if (matrix.ranks() != mpi::size()) {
    return invalid_argument("ceiling", "byte matrix of {} ranks on a run of {}", matrix.ranks(), mpi::size());
  }
  matrix_ = std::move(matrix);
  plan_ = copy_plan(*matrix_, mpi::rank());
  EPS_RETURN_IF_ERROR(map_node_segments());
  source_.assign(static_cast<std::size_t>(plan_.send_bytes), std::byte{0});
  return Status();
}

// The node communicator, this rank's segment (flags, then the receive region) and every node peer's, mapped.
Status CeilingMeasurement::map_node_segments() {
  const Deadline deadline(timeout_);
  EPS_ASSIGN_OR_RETURN(node_, mpi::comm_split_node(MPI_COMM_WORLD, deadline));
  int node_size = 0;
  EPS_MPI_CHECK(MPI_Comm_size(node_, &node_size));
  EPS_ASSIGN_OR_RETURN(const std::vector<int> world_of, mpi::allgather_int(mpi::rank(), node_, deadline));
  node_rank_of_.assign(static_cast<std::size_t>(mpi::size()), -1);
  for (int n = 0; n < node_size; ++n) node_rank_of_[static_cast<std::size_t>(world_of[n])] = n;
  for (const CopyBlock& block : plan_.blocks) {
    if (node_rank_of_[static_cast<std::size_t>(block.peer)] < 0) {
      return invalid_argument("ceiling",
                              "rank {} copies {} bytes to rank {} on another node; the shared-memory "
                              "ceiling needs every pair on one node",
                              mpi::rank(), block.bytes, block.peer);
    }
  }
  header_bytes_ = round_up(kFlagStride * static_cast<std::size_t>(node_size), kPageBytes);
  EPS_ASSIGN_OR_RETURN(
      const mpi::SharedWindow mine,
      mpi::win_allocate_shared(header_bytes_ + static_cast<std::size_t>(plan_.recv_bytes), node_, deadline));
  window_ = mine.window;
  EPS_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_));
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the flags are shared between processes");
  for (int n = 0; n < node_size; ++n) new (mine.base + kFlagStride * n) std::atomic<std::uint64_t>(0);
  segments_.assign(static_cast<std::size_t>(node_size), nullptr);
  for (int n = 0; n < node_size; ++n) {
    MPI_Aint bytes = 0;
    int unit = 0;
    EPS_MPI_CHECK(MPI_Win_shared_query(window_, n, &bytes, &unit, &segments_[static_cast<std::size_t>(n)]));
  }
  EPS_MPI_CHECK(MPI_Win_sync(window_));
  return mpi::barrier(MPI_COMM_WORLD, deadline);  // every flag is constructed before anyone sets one
}

std::atomic<std::uint64_t>* CeilingMeasurement::flag_of(int world_rank, int writer_world_rank) const {
  const int owner = node_rank_of_[static_cast<std::size_t>(world_rank)];
  const int writer = node_rank_of_[static_cast<std::size_t>(writer_world_rank)];
  return std::launder(reinterpret_cast<std::atomic<std::uint64_t>*>(
      segments_[static_cast<std::size_t>(owner)] + kFlagStride * writer));
}

std::span<std::byte> CeilingMeasurement::received() const {
  return {region_of(mpi::rank()), static_cast<std::size_t>(plan_.recv_bytes)};
}

std::byte* CeilingMeasurement::region_of(int world_rank) const {
  return segments_[static_cast<std::size_t>(node_rank_of_[static_cast<std::size_t>(world_rank)])] +
         header_bytes_;
}

void CeilingMeasurement::fill_source(int iteration) {
  if (filled_for_ == iteration) return;
  bench_fabric::fill_pattern(seed_of(iteration), mpi::rank(), 0, source_);
  filled_for_ = iteration;
}

Status CeilingMeasurement::prepare(int iteration, bool checking) {
  if (!matrix_) {
    EPS_RETURN_IF_ERROR(start());
    fill_source(0);
  }
  if (!checking) return Status();
  fill_source(iteration);
  poison_received(*matrix_, plan_, mpi::rank(), seed_of(iteration), received());
  return Status();
}

Result<double> CeilingMeasurement::run(int) {
  const std::uint64_t id = ++iteration_id_;
  const int me = mpi::rank();
  const Deadline deadline(timeout_);
  const double start = MPI_Wtime();
  for (const CopyBlock& block : plan_.blocks) {
    std::memcpy(region_of(block.peer) + block.dst_offset, source_.data() + block.src_offset,
                static_cast<std::size_t>(block.bytes));
    flag_of(block.peer, me)->store(id, std::memory_order_release);
  }
  for (int src : plan_.sources) {
    std::atomic<std::uint64_t>* flag = flag_of(me, src);
    EPS_RETURN_IF_ERROR(bench_fabric::spin_until(
        deadline, [&] { return flag->load(std::memory_order_acquire) >= id; },
        [&] {
          return fmt::format("the ceiling copy of rank {} into rank {}: {}", src, me,
                             describe_counter_wait(src, 0, id, flag->load()));
        }));
  }
  return (MPI_Wtime() - start) * 1e6;
}

// Every source's flag showed this iteration before run() returned: its bytes are here.
Result<Mismatches> CeilingMeasurement::check(int iteration) {
  return check_received(*matrix_, plan_, mpi::rank(), seed_of(iteration), received(), "ceiling copy");
}

}  // namespace eps::bench
