#include "impls/fabric/fabric_base.hpp"

#include <fmt/format.h>

#include "impls/runtime/mpi_runtime.hpp"

namespace eps::fabric {
namespace {

constexpr std::uint32_t kSeqMask = (1u << kBarrierSeqBits) - 1;
constexpr int kRoundShift = 24;
constexpr std::size_t kBarrierSlotBytes = 8;

int barrier_rounds(int size) {
  int rounds = 0;
  while ((1 << rounds) < size) ++rounds;
  return rounds;
}

}  // namespace

std::uint32_t barrier_imm(int round, std::uint32_t seq) {
  return (kImmReservedKind << kImmKindShift) | (static_cast<std::uint32_t>(round) << kRoundShift) |
         (seq & kSeqMask);
}
bool is_barrier_imm(std::uint32_t imm) { return (imm >> kImmKindShift) == kImmReservedKind; }
int barrier_imm_round(std::uint32_t imm) { return static_cast<int>((imm >> kRoundShift) & 0x3f); }
std::uint32_t barrier_imm_seq(std::uint32_t imm) { return imm & kSeqMask; }

FabricBase::FabricBase(MPI_Comm comm, double timeout_seconds)
    : comm_(comm), timeout_seconds_(timeout_seconds) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  arrivals_.assign(std::size_t{1} << kBarrierSeqBits, std::vector<int>(barrier_rounds(size_) + 1, 0));
}

FabricBase::~FabricBase() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Status FabricBase::start() {
  if (!regions_.empty()) return Status();
  EPS_ASSIGN_OR_RETURN(int id, create(2 * kBarrierSlotBytes, nullptr));
  (void)id;
  return Status();
}

Result<int> FabricBase::create(std::size_t bytes, std::byte* memory) {
  const int id = static_cast<int>(regions_.size());
  EPS_ASSIGN_OR_RETURN(std::span<std::byte> local, create_region(id, bytes, memory));
  RegionInfo info{local, std::vector<std::size_t>(static_cast<std::size_t>(size_), 0)};
  const std::uint64_t mine = bytes;
  std::vector<std::uint64_t> all(static_cast<std::size_t>(size_), 0);
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Iallgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, &request));
  EPS_RETURN_IF_ERROR(mpi::wait(&request, Deadline(timeout_seconds_), [this, id] {
    return fmt::format("region {} sizes from {} ranks (fabric {}, rank {})", id, size_, backend_name(),
                       rank_);
  }));
  for (int r = 0; r < size_; ++r) info.sizes[static_cast<std::size_t>(r)] = all[static_cast<std::size_t>(r)];
  regions_.push_back(std::move(info));
  return id;
}

std::size_t FabricBase::region_bytes(int index, int rank) const {
  if (index < 0 || index >= static_cast<int>(regions_.size()) || rank < 0 || rank >= size_) return 0;
  return regions_[static_cast<std::size_t>(index)].sizes[static_cast<std::size_t>(rank)];
}

Result<Region> FabricBase::allocate(std::size_t bytes) {
  if (regions_.empty()) return Status(StatusCode::kEnvironment, "fabric: start() was not called");
  EPS_ASSIGN_OR_RETURN(int id, create(bytes, nullptr));
  return Region{id - 1, regions_[static_cast<std::size_t>(id)].local};
}

Result<Region> FabricBase::adopt(std::span<std::byte> memory) {
  if (regions_.empty()) return Status(StatusCode::kEnvironment, "fabric: start() was not called");
  EPS_ASSIGN_OR_RETURN(int id, create(memory.size(), memory.data()));
  return Region{id - 1, regions_[static_cast<std::size_t>(id)].local};
}

Status FabricBase::check_put(const PutOp& op) const {
  if (op.peer < 0 || op.peer >= size_) return out_of_range("put.peer", 0, size_ - 1, op.peer);
  const int caller_regions = static_cast<int>(regions_.size()) - 1;
  for (auto [field, id] :
       {std::pair{"put.local_region", op.local_region}, std::pair{"put.remote_region", op.remote_region}}) {
    if (id < 0 || id >= caller_regions) {
      return invalid_argument(field, "must name an allocated region in [0, {}), got {}", caller_regions, id);
    }
  }
  const std::size_t max_bytes = backend_limits().max_put_bytes;
  if (op.bytes > max_bytes) {
    return invalid_argument("put.bytes", "must be in [0, {}] on {}, got {}", max_bytes, backend_name(),
                            op.bytes);
  }
  if (op.bytes == 0 && !op.imm) {
    return invalid_argument("put.bytes", "a put without an immediate must move at least 1 byte");
  }
  if (op.imm && (*op.imm >> kImmKindShift) == kImmReservedKind) {
    return invalid_argument("put.imm",
                            "immediates with both top bits set are reserved for the fabric barrier, "
                            "got {:#010x}",
                            *op.imm);
  }
  const std::size_t local_size = regions_[static_cast<std::size_t>(op.local_region) + 1].local.size();
  if (op.local_offset > local_size || op.bytes > local_size - op.local_offset) {
    return invalid_argument("put.local_offset", "[{}, {}) must lie within local region {} of {} bytes",
                            op.local_offset, op.local_offset + op.bytes, op.local_region, local_size);
  }
  const std::size_t remote_size =
      regions_[static_cast<std::size_t>(op.remote_region) + 1].sizes[static_cast<std::size_t>(op.peer)];
  if (op.remote_offset > remote_size || op.bytes > remote_size - op.remote_offset) {
    return invalid_argument("put.remote_offset", "[{}, {}) must lie within region {} of rank {} ({} bytes)",
                            op.remote_offset, op.remote_offset + op.bytes, op.remote_region, op.peer,
                            remote_size);
  }
  return Status();
}

// The support check comes first: a fabric without atomics says so whatever the arguments.
Status FabricBase::check_atomic(const AtomicOp& op) const {
  EPS_RETURN_IF_ERROR(backend_atomic_support());
  if (op.peer < 0 || op.peer >= size_) return out_of_range("atomic.peer", 0, size_ - 1, op.peer);
  const int caller_regions = static_cast<int>(regions_.size()) - 1;
  if (op.remote_region < 0 || op.remote_region >= caller_regions) {
    return invalid_argument("atomic.remote_region", "must name an allocated region in [0, {}), got {}",
                            caller_regions, op.remote_region);
  }
  if (op.remote_offset % kAtomicBytes != 0) {
    return invalid_argument("atomic.remote_offset", "must be a multiple of {} (a 64-bit word), got {}",
                            kAtomicBytes, op.remote_offset);
  }
  const std::size_t remote_size =
      regions_[static_cast<std::size_t>(op.remote_region) + 1].sizes[static_cast<std::size_t>(op.peer)];
  if (op.remote_offset > remote_size || kAtomicBytes > remote_size - op.remote_offset) {
    return invalid_argument("atomic.remote_offset",
                            "[{}, {}) must lie within region {} of rank {} ({} bytes)", op.remote_offset,
                            op.remote_offset + kAtomicBytes, op.remote_region, op.peer, remote_size);
  }
  return Status();
}

template <typename PostOnce>
Result<bool> FabricBase::post_counted_with(PostOnce&& post_once) {
  if (outstanding_ >= backend_limits().max_outstanding_puts) {
    EPS_RETURN_IF_ERROR(drain());
    if (outstanding_ >= backend_limits().max_outstanding_puts) return false;
  }
  EPS_ASSIGN_OR_RETURN(bool posted, post_once());
  if (posted) ++outstanding_;
  return posted;
}

Result<bool> FabricBase::post_counted(const PutOp& op) {
  return post_counted_with([&] { return post(op); });
}

Result<bool> FabricBase::try_put(const PutOp& op) {
  EPS_RETURN_IF_ERROR(check_put(op));
  PutOp backend = op;
  backend.local_region = region_index(op.local_region);
  backend.remote_region = region_index(op.remote_region);
  return post_counted(backend);
}

Result<bool> FabricBase::try_atomic_add(const AtomicOp& op) {
  EPS_RETURN_IF_ERROR(check_atomic(op));
  AtomicOp backend = op;
  backend.remote_region = region_index(op.remote_region);
  return post_counted_with([&] { return post_atomic(backend); });
}

Status FabricBase::drain() {
  scratch_.clear();
  EPS_RETURN_IF_ERROR(progress(scratch_));
  for (const Completion& c : scratch_) {
    if (c.kind == CompletionKind::kLocal) {
      --outstanding_;
      if (c.context == kBarrierContext) continue;
    } else if (is_barrier_imm(c.imm)) {
      ++arrivals_[barrier_imm_seq(c.imm)][static_cast<std::size_t>(barrier_imm_round(c.imm))];
      continue;
    }
    stash_.push_back(c);
  }
  return Status();
}

Result<std::size_t> FabricBase::poll(std::span<Completion> out) {
  if (stash_.size() < out.size()) EPS_RETURN_IF_ERROR(drain());
  std::size_t n = 0;
  while (n < out.size() && !stash_.empty()) {
    out[n++] = stash_.front();
    stash_.pop_front();
  }
  return n;
}

Status FabricBase::quiet(const Deadline& deadline) {
  Status failure;
  EPS_RETURN_IF_ERROR(wait_until(
      deadline,
      [&] {
        failure = drain();
        return !failure.ok() || outstanding_ == 0;
      },
      [&] {
        return fmt::format(
            "quiet on fabric {} (rank {}): {} puts or atomics still without a local completion",
            backend_name(), rank_, outstanding_);
      }));
  return failure;
}

// Dissemination barrier: in round j, send to rank + 2^j and wait for the message from rank - 2^j.
Status FabricBase::barrier(const Deadline& deadline) {
  const std::uint32_t seq = barrier_seq_++ & kSeqMask;
  const int rounds = barrier_rounds(size_);
  for (int j = 0; j < rounds; ++j) {
    const int to = (rank_ + (1 << j)) % size_;
    const PutOp op{to, 0, 0, 0, kBarrierSlotBytes, kBarrierSlotBytes, barrier_imm(j, seq), kBarrierContext};
    Status failure;
    EPS_RETURN_IF_ERROR(wait_until(
        deadline,
        [&] {
          Result<bool> posted = post_counted(op);
          if (!posted.ok()) failure = posted.status();
          if (!posted.ok() || *posted) return true;
          // Backpressure: drive progress as every caller must, or a provider that completes (and frees
          // resources) only inside its progress call never lets this put through.
          failure = drain();
          return !failure.ok();
        },
        [&] {
          return fmt::format("barrier {} round {} on fabric {}: posting to rank {}", seq, j, backend_name(),
                             to);
        }));
    EPS_RETURN_IF_ERROR(failure);
    int& arrived = arrivals_[seq][static_cast<std::size_t>(j)];
    EPS_RETURN_IF_ERROR(wait_until(
        deadline,
        [&] {
          failure = drain();
          return !failure.ok() || arrived > 0;
        },
        [&] {
          const int from = ((rank_ - (1 << j)) % size_ + size_) % size_;
          return fmt::format("barrier {} round {} on fabric {} (rank {}): message from rank {}", seq, j,
                             backend_name(), rank_, from);
        }));
    EPS_RETURN_IF_ERROR(failure);
    --arrived;
  }
  return Status();
}

}  // namespace eps::fabric
