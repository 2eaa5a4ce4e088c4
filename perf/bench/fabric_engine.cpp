#include "perf/bench/fabric_engine.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "impls/runtime/mpi_runtime.hpp"
#include "reference/data/philox.hpp"

namespace eps {
namespace bench_fabric {

int put_peer(int rank, int ranks) { return (rank + ranks / 2) % ranks; }

int put_source(int rank, int ranks) { return (rank + ranks - ranks / 2) % ranks; }

int ping_partner(int rank, int ranks) {
  const int half = ranks / 2;
  if (rank < half) return rank + half;
  if (rank < 2 * half) return rank - half;
  return rank;
}

std::size_t window_slots(std::size_t bytes, int window) {
  const std::size_t fit = std::max<std::size_t>(1, kRegionCapBytes / std::max<std::size_t>(bytes, 1));
  return std::min(fit, static_cast<std::size_t>(window));
}

namespace {

constexpr std::uint32_t kPatternStream = 0xfab0;

data::PhiloxBlock pattern_block(std::uint64_t seed, int writer, std::uint64_t block) {
  const data::PhiloxKey key{{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const data::PhiloxCounter counter{{static_cast<std::uint32_t>(block),
                                     static_cast<std::uint32_t>(block >> 32),
                                     static_cast<std::uint32_t>(writer), kPatternStream}};
  return data::philox4x32_10(counter, key);
}

std::uint8_t block_byte(const data::PhiloxBlock& b, std::size_t byte) {
  return static_cast<std::uint8_t>(b.v[(byte % 16) / 4] >> (8 * (byte % 4)));
}

// Calls visit(i, expected byte) for i in [0, n), one Philox block per 16 bytes.
template <typename Visit>
void for_each_pattern_byte(std::uint64_t seed, int writer, std::size_t offset, std::size_t n, Visit visit) {
  std::size_t i = 0;
  while (i < n) {
    const std::size_t at = offset + i;
    const data::PhiloxBlock block = pattern_block(seed, writer, at / 16);
    for (std::size_t byte = at % 16; byte < 16 && i < n; ++byte, ++i) visit(i, block_byte(block, byte));
  }
}

}  // namespace

std::uint8_t pattern_byte(std::uint64_t seed, int writer, std::size_t offset) {
  return block_byte(pattern_block(seed, writer, offset / 16), offset);
}

void fill_pattern(std::uint64_t seed, int writer, std::size_t offset, std::span<std::byte> out) {
  for_each_pattern_byte(seed, writer, offset, out.size(),
                        [&](std::size_t i, std::uint8_t v) { out[i] = static_cast<std::byte>(v); });
}

void fill_poison(std::uint64_t seed, int writer, std::size_t offset, std::span<std::byte> out) {
  for_each_pattern_byte(seed, writer, offset, out.size(),
                        [&](std::size_t i, std::uint8_t v) { out[i] = ~static_cast<std::byte>(v); });
}

WrongBytes count_wrong(std::uint64_t seed, int writer, std::size_t offset, std::span<const std::byte> data) {
  WrongBytes wrong;
  for_each_pattern_byte(seed, writer, offset, data.size(), [&](std::size_t i, std::uint8_t v) {
    const auto got = static_cast<std::uint8_t>(data[i]);
    if (got == v) return;
    if (wrong.count++ == 0) {
      wrong.first_offset = i;
      wrong.expected = v;
      wrong.got = got;
    }
  });
  return wrong;
}

// wait_until without its sleeping phase: a 50 us sleep would be measured as fabric time. Yielding keeps an
// oversubscribed peer (the one that must drive progress) running.
Status spin_until(const Deadline& deadline, const std::function<bool()>& predicate,
                  const std::function<std::string()>& describe) {
  constexpr std::int64_t kSpinPolls = 64;
  constexpr std::int64_t kDeadlineEvery = 256;
  for (std::int64_t polls = 0;; ++polls) {
    if (predicate()) return Status();
    if (polls % kDeadlineEvery == 0 && deadline.expired()) {
      return Status(StatusCode::kEnvironment, fmt::format("timed out after {:.3f} s waiting for {}",
                                                          deadline.budget_seconds(), describe()));
    }
    if (polls >= kSpinPolls) std::this_thread::yield();
  }
}

Status PutEngine::post(int peer, std::size_t bytes, std::size_t slot, bool with_imm,
                       const Deadline& deadline) {
  const fabric::PutOp op{.peer = peer,
                         .local_region = src_.id,
                         .local_offset = slot * bytes,
                         .remote_region = dst_.id,
                         .remote_offset = slot * bytes,
                         .bytes = bytes,
                         .imm = with_imm ? std::optional<std::uint32_t>(next_imm()) : std::nullopt,
                         .context = static_cast<std::uint64_t>(posted_)};
  Status failed;
  EPS_RETURN_IF_ERROR(spin_until(
      deadline,
      [&] {
        Result<bool> posted = fabric_.try_put(op);
        if (!posted.ok()) failed = posted.status();
        if (!posted.ok() || *posted) return true;
        failed = drain();
        return !failed.ok();
      },
      [&] {
        return fmt::format("room to post a put to rank {} (backpressure; {})", peer, fabric_.describe());
      }));
  EPS_RETURN_IF_ERROR(failed);
  ++posted_;
  return Status();
}

Status PutEngine::wait(std::int64_t remote, int peer, const Deadline& deadline) {
  Status failed;
  EPS_RETURN_IF_ERROR(spin_until(
      deadline,
      [&] {
        failed = drain();
        return !failed.ok() || (local_done_ == posted_ && remote_seen_ >= remote);
      },
      [&] {
        return fmt::format("local completions {} of {}; immediates from rank {}: {} ({})", local_done_,
                           posted_, peer,
                           describe_counter_wait(peer, 0, static_cast<std::uint64_t>(remote),
                                                 static_cast<std::uint64_t>(remote_seen_)),
                           fabric_.describe());
      }));
  return failed;
}

Status PutEngine::wait_remote(std::int64_t remote, int peer, const Deadline& deadline) {
  Status failed;
  EPS_RETURN_IF_ERROR(spin_until(
      deadline,
      [&] {
        failed = drain();
        return !failed.ok() || remote_seen_ >= remote;
      },
      [&] {
        return fmt::format("the immediate of rank {}: {} ({})", peer,
                           describe_counter_wait(peer, 0, static_cast<std::uint64_t>(remote),
                                                 static_cast<std::uint64_t>(remote_seen_)),
                           fabric_.describe());
      }));
  return failed;
}

Status PutEngine::drain() {
  for (;;) {
    EPS_ASSIGN_OR_RETURN(std::size_t n, fabric_.poll(completions_));
    for (std::size_t i = 0; i < n; ++i) {
      (completions_[i].kind == fabric::CompletionKind::kLocal ? local_done_ : remote_seen_) += 1;
    }
    if (n < completions_.size()) return Status();
  }
}

CopyEngine::~CopyEngine() {
  if (window_ != MPI_WIN_NULL) {
    MPI_Win_unlock_all(window_);
    const Status freed = mpi::win_free(&window_, node_, Deadline(timeout_seconds_));
    if (!freed.ok())
      std::fprintf(stderr, "epsuite: bench fabric copy segment: %s\n", freed.message().c_str());
  }
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

Status CopyEngine::start(std::size_t bytes, const Deadline& deadline) {
  timeout_seconds_ = deadline.budget_seconds();
  EPS_ASSIGN_OR_RETURN(node_, mpi::comm_split_node(MPI_COMM_WORLD, deadline));
  EPS_MPI_CHECK(MPI_Comm_rank(node_, &node_rank_));
  EPS_MPI_CHECK(MPI_Comm_size(node_, &node_size_));
  EPS_ASSIGN_OR_RETURN(const mpi::SharedWindow mine,
                       mpi::win_allocate_shared(kHeaderBytes + bytes, node_, deadline));
  window_ = mine.window;
  EPS_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_));
  const int peer = put_peer(node_rank_, node_size_);
  MPI_Aint peer_bytes = 0;
  int unit = 0;
  std::byte* theirs = nullptr;
  EPS_MPI_CHECK(MPI_Win_shared_query(window_, peer, &peer_bytes, &unit, &theirs));
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the flag is shared between processes");
  flag_ = new (mine.base) std::atomic<std::uint64_t>(0);
  data_ = std::span<std::byte>(mine.base + kHeaderBytes, bytes);
  peer_flag_ = reinterpret_cast<std::atomic<std::uint64_t>*>(theirs);
  peer_data_ = theirs + kHeaderBytes;
  EPS_MPI_CHECK(MPI_Win_sync(window_));
  // The world rank of the node-local put_source, for -c messages.
  EPS_ASSIGN_OR_RETURN(std::vector<int> world, mpi::allgather_int(mpi::rank(), node_, deadline));
  source_world_rank_ = world[static_cast<std::size_t>(put_source(node_rank_, node_size_))];
  return mpi::barrier(MPI_COMM_WORLD, deadline);  // every flag is constructed before anyone sets one
}

Result<double> CopyEngine::iteration(std::span<const std::byte> src, std::size_t bytes, int window,
                                     double timeout_seconds) {
  const std::size_t slots = window_slots(bytes, window);
  const std::uint64_t id = ++iteration_;
  const Deadline deadline(timeout_seconds);
  const double start = MPI_Wtime();
  for (int i = 0; i < window; ++i) {
    const std::size_t at = static_cast<std::size_t>(i) % slots * bytes;
    std::memcpy(peer_data_ + at, src.data() + at, bytes);
  }
  peer_flag_->store(id, std::memory_order_release);
  EPS_RETURN_IF_ERROR(spin_until(
      deadline, [&] { return flag_->load(std::memory_order_acquire) >= id; },
      [&] {
        return fmt::format("the copy flag of node rank {}: {}", put_source(node_rank_, node_size_),
                           describe_counter_wait(source_world_rank_, 0, id, flag_->load()));
      }));
  return (MPI_Wtime() - start) * 1e6;
}

}  // namespace bench_fabric
}  // namespace eps
