#include "harness/bench_fabric.hpp"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "harness/bench_command.hpp"
#include "harness/results.hpp"
#include "harness/version.hpp"
#include "impls/fabric/chaos/chaos_fabric.hpp"
#include "impls/fabric/fabric_registry.hpp"
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

namespace {

// Column widths shared by the title lines and the rows.
constexpr int kSize = 10;
constexpr int kBytes = 12;
constexpr int kTime = 10;
constexpr int kRate = 10;
constexpr int kRatio = 9;
constexpr int kSlowest = 8;
constexpr int kWrong = 7;

std::string with_hashes(const std::string& text) {
  std::string out;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    out += (line.starts_with('#') ? line : "# " + line) + "\n";
    begin = end + 1;
  }
  return out;
}

}  // namespace

std::string fabric_table_header(const std::string& config_lines) {
  std::string out = with_hashes(config_lines) + "#\n";
  out += fmt::format("#{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}\n", "size",
                     kSize - 1, "bytes", kBytes, "put p50", kTime, "put", kRate, "lat p50", kTime, "lat p99",
                     kTime, "copy p50", kTime, "copy", kRate, "put/copy", kRatio, "slowest", kSlowest,
                     "#wrong", kWrong);
  out += fmt::format("#{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}\n", "(B)", kSize - 1,
                     "(B)", kBytes, "(us)", kTime, "(GB/s)", kRate, "(us)", kTime, "(us)", kTime, "(us)",
                     kTime, "(GB/s)", kRate, "", kRatio, "rank", kSlowest);
  return out;
}

std::string fabric_table_row(const FabricRow& r) {
  const std::string wrong = r.wrong ? fmt::format("{}", *r.wrong) : "N/A";
  const double ratio = r.copy_gbps > 0 ? r.put_gbps / r.copy_gbps : 0.0;
  return fmt::format(
      "{:>{}}{:>{}}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}}{:>{}}\n", r.size,
      kSize, r.bytes, kBytes, r.put_p50_us, kTime, r.put_gbps, kRate, r.lat_p50_us, kTime, r.lat_p99_us,
      kTime, r.copy_p50_us, kTime, r.copy_gbps, kRate, ratio, kRatio, r.slowest_rank, kSlowest, wrong,
      kWrong);
}

}  // namespace bench_fabric

using bench_fabric::count_wrong;
using bench_fabric::fill_pattern;
using bench_fabric::fill_poison;
using bench_fabric::WrongBytes;

namespace {

// Everything the op needs, validated before anything runs or is written.
struct FabricPlan {
  std::string fabric;
  std::string chaos;
  std::vector<std::int64_t> sizes;
  int window = 0;
  int iters = 0;
  int warmup = 0;
  bool check = false;
  std::uint64_t seed = 0;
  double timeout = kDefaultTimeoutSeconds;
  std::size_t region_bytes = 0;  // per region: max over sizes of slots * size
};

std::string fabric_flags() {
  std::vector<std::string> flags;
  for (const std::string& name : bench_fabric_param_names()) flags.push_back("--" + name);
  return fmt::format("{}", fmt::join(flags, ", "));
}

Status refuse_transport_flags(const Params& p) {
  for (const ParamSpec& spec : bench_command_specs()) {
    const auto& used = bench_fabric_param_names();
    if (std::find(used.begin(), used.end(), spec.name) != used.end()) continue;
    if (p.source(spec.name) == ParamSource::kFlag) {
      return invalid_argument(
          flag_name(spec),
          "is a flag of the transport ops; 'bench fabric' measures raw puts of --sizes bytes "
          "and takes {}",
          fabric_flags());
    }
  }
  return Status();
}

Result<FabricPlan> make_plan(const Params& p) {
  EPS_RETURN_IF_ERROR(refuse_transport_flags(p));
  FabricPlan plan;
  plan.fabric = p.string("fabric");
  plan.chaos = p.string("chaos");
  plan.sizes = p.sweep("sizes").values;
  plan.window = static_cast<int>(p.integer("window"));
  plan.iters = static_cast<int>(p.integer("iters"));
  plan.warmup = static_cast<int>(p.integer("warmup"));
  plan.check = p.enabled("check");
  plan.seed = static_cast<std::uint64_t>(p.integer("seed"));
  plan.timeout = p.number("timeout");
  if (plan.sizes.empty()) return invalid_argument("--sizes", "needs at least one message size");
  if (fabric::fabric_registry().find(plan.fabric, nullptr) == nullptr) {
    return invalid_argument("--fabric", "unknown fabric '{}'; registered: {}", plan.fabric,
                            fmt::join(fabric::fabric_registry().names(), ", "));
  }
  if (!plan.chaos.empty()) EPS_RETURN_IF_ERROR(fabric::parse_chaos(plan.chaos).status());
  if (p.string("json") == "-") {
    return invalid_argument("--json",
                            "bench writes its results to a file (the table goes to stdout); '-' is not "
                            "supported here");
  }
  for (std::int64_t s : plan.sizes) {
    const auto bytes = static_cast<std::size_t>(s);
    plan.region_bytes = std::max(plan.region_bytes, bench_fabric::window_slots(bytes, plan.window) * bytes);
  }
  return plan;
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

Status check_limits(const FabricPlan& plan, const fabric::Fabric& f) {
  const std::size_t max_put = f.limits().max_put_bytes;
  for (std::int64_t s : plan.sizes) {
    if (static_cast<std::size_t>(s) > max_put) {
      return invalid_argument("--sizes", "{} bytes exceed the largest put of {} ({} bytes)", s, f.name(),
                              max_put);
    }
  }
  return Status();
}

// Puts and their completions, counted cumulatively so that a phase waits for "everything posted so far".
class PutEngine {
 public:
  PutEngine(fabric::Fabric& f, const FabricPlan& plan, fabric::Region src, fabric::Region dst)
      : fabric_(f), plan_(plan), src_(src), dst_(dst) {}

  std::span<std::byte> src() const { return src_.local; }
  std::span<std::byte> dst() const { return dst_.local; }

  Status barrier() { return fabric_.barrier(Deadline(plan_.timeout)); }

  // Posts put i of a window of `bytes` to `peer`, retrying under backpressure while polling.
  Status post(int peer, std::size_t bytes, std::size_t slot, bool with_imm, const Deadline& deadline) {
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

  // Waits until every put posted so far has its local completion and `remote` immediates have arrived
  // in total since the engine was made.
  Status wait(std::int64_t remote, int peer, const Deadline& deadline) {
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
  // Only the immediates (the latency responder and initiator do not wait for their local completions).
  Status wait_remote(std::int64_t remote, int peer, const Deadline& deadline) {
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

  std::int64_t remote_seen() const { return remote_seen_; }

 private:
  // Immediates count up and never set both top bits (kImmReservedKind is the fabric barrier's).
  std::uint32_t next_imm() { return imm_++ & ((std::uint32_t{1} << fabric::kImmKindShift) - 1); }

  Status drain() {
    for (;;) {
      EPS_ASSIGN_OR_RETURN(std::size_t n, fabric_.poll(completions_));
      for (std::size_t i = 0; i < n; ++i) {
        (completions_[i].kind == fabric::CompletionKind::kLocal ? local_done_ : remote_seen_) += 1;
      }
      if (n < completions_.size()) return Status();
    }
  }

  fabric::Fabric& fabric_;
  const FabricPlan& plan_;
  fabric::Region src_;
  fabric::Region dst_;
  std::array<fabric::Completion, 64> completions_{};
  std::int64_t posted_ = 0;
  std::int64_t local_done_ = 0;
  std::int64_t remote_seen_ = 0;
  std::uint32_t imm_ = 0;
};

// This rank's time of one bandwidth iteration (µs): a window of puts to put_peer, the last with an
// immediate; done when every local completion and the immediate from put_source have arrived.
Result<double> bandwidth_iteration(PutEngine& e, const FabricPlan& plan, std::size_t bytes) {
  const int peer = bench_fabric::put_peer(mpi::rank(), mpi::size());
  const std::size_t slots = bench_fabric::window_slots(bytes, plan.window);
  const std::int64_t remote = e.remote_seen() + 1;
  EPS_RETURN_IF_ERROR(e.barrier());
  const Deadline deadline(plan.timeout);
  const double start = MPI_Wtime();
  for (int i = 0; i < plan.window; ++i) {
    EPS_RETURN_IF_ERROR(
        e.post(peer, bytes, static_cast<std::size_t>(i) % slots, i + 1 == plan.window, deadline));
  }
  EPS_RETURN_IF_ERROR(e.wait(remote, bench_fabric::put_source(mpi::rank(), mpi::size()), deadline));
  return (MPI_Wtime() - start) * 1e6;
}

// This rank's round trip of one ping-pong (µs). The lower rank of a pair pings first; a rank paired with
// itself plays both parts. Local completions are collected after the clock stops.
Result<double> latency_iteration(PutEngine& e, const FabricPlan& plan, std::size_t bytes) {
  const int partner = bench_fabric::ping_partner(mpi::rank(), mpi::size());
  const bool self = partner == mpi::rank();
  std::int64_t remote = e.remote_seen();
  EPS_RETURN_IF_ERROR(e.barrier());
  const Deadline deadline(plan.timeout);
  const double start = MPI_Wtime();
  if (self || mpi::rank() < partner) {
    EPS_RETURN_IF_ERROR(e.post(partner, bytes, 0, true, deadline));
    EPS_RETURN_IF_ERROR(e.wait_remote(++remote, partner, deadline));
  }
  if (self || mpi::rank() > partner) {
    if (!self) EPS_RETURN_IF_ERROR(e.wait_remote(++remote, partner, deadline));
    EPS_RETURN_IF_ERROR(e.post(partner, bytes, 0, true, deadline));
    if (self) EPS_RETURN_IF_ERROR(e.wait_remote(++remote, partner, deadline));
  }
  const double round_trip = (MPI_Wtime() - start) * 1e6;
  EPS_RETURN_IF_ERROR(e.wait(remote, partner, deadline));
  return round_trip;
}

// The shared-memory copy: one MPI_Win_allocate_shared segment per rank of this node (a flag page, then
// the data), written by the node-local put_source with memcpy.
class CopyEngine {
 public:
  static constexpr std::size_t kHeaderBytes = 4096;

  CopyEngine() = default;
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;
  ~CopyEngine() {
    if (window_ != MPI_WIN_NULL) {
      MPI_Win_unlock_all(window_);
      MPI_Win_free(&window_);
    }
    if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
  }

  // Collective over MPI_COMM_WORLD.
  Status start(std::size_t bytes, const Deadline& deadline) {
    EPS_RETURN_IF_ERROR(mpi::barrier(MPI_COMM_WORLD, deadline));
    EPS_MPI_RETURN_IF_ERROR(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_));
    EPS_MPI_RETURN_IF_ERROR(MPI_Comm_rank(node_, &node_rank_));
    EPS_MPI_RETURN_IF_ERROR(MPI_Comm_size(node_, &node_size_));
    MPI_Info info = MPI_INFO_NULL;
    EPS_MPI_RETURN_IF_ERROR(MPI_Info_create(&info));
    EPS_MPI_RETURN_IF_ERROR(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    std::byte* mine = nullptr;
    const int rc =
        MPI_Win_allocate_shared(static_cast<MPI_Aint>(kHeaderBytes + bytes), 1, info, node_, &mine, &window_);
    MPI_Info_free(&info);
    EPS_MPI_RETURN_IF_ERROR(rc);
    EPS_MPI_RETURN_IF_ERROR(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_));
    const int peer = bench_fabric::put_peer(node_rank_, node_size_);
    MPI_Aint peer_bytes = 0;
    int unit = 0;
    std::byte* theirs = nullptr;
    EPS_MPI_RETURN_IF_ERROR(MPI_Win_shared_query(window_, peer, &peer_bytes, &unit, &theirs));
    static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the flag is shared between processes");
    flag_ = new (mine) std::atomic<std::uint64_t>(0);
    data_ = std::span<std::byte>(mine + kHeaderBytes, bytes);
    peer_flag_ = reinterpret_cast<std::atomic<std::uint64_t>*>(theirs);
    peer_data_ = theirs + kHeaderBytes;
    EPS_MPI_RETURN_IF_ERROR(MPI_Win_sync(window_));
    return mpi::barrier(MPI_COMM_WORLD, deadline);  // every flag is constructed before anyone sets one
  }

  std::span<std::byte> data() const { return data_; }
  int source_world_rank() const { return source_world_rank_; }
  Status find_source(const Deadline& deadline) {
    // The world rank of the node-local put_source, for -c messages.
    EPS_ASSIGN_OR_RETURN(std::vector<int> world, mpi::allgather_int(mpi::rank(), node_, deadline));
    source_world_rank_ = world[static_cast<std::size_t>(bench_fabric::put_source(node_rank_, node_size_))];
    return Status();
  }

  // This rank's time (µs): memcpy a window of `bytes` messages into the peer's segment, set its flag,
  // wait for our own flag.
  Result<double> iteration(std::span<const std::byte> src, std::size_t bytes, const FabricPlan& plan) {
    const std::size_t slots = bench_fabric::window_slots(bytes, plan.window);
    const std::uint64_t id = ++iteration_;
    EPS_RETURN_IF_ERROR(mpi::barrier(MPI_COMM_WORLD, Deadline(plan.timeout)));
    const Deadline deadline(plan.timeout);
    const double start = MPI_Wtime();
    for (int i = 0; i < plan.window; ++i) {
      const std::size_t at = static_cast<std::size_t>(i) % slots * bytes;
      std::memcpy(peer_data_ + at, src.data() + at, bytes);
    }
    peer_flag_->store(id, std::memory_order_release);
    EPS_RETURN_IF_ERROR(spin_until(
        deadline, [&] { return flag_->load(std::memory_order_acquire) >= id; },
        [&] {
          return fmt::format("the copy flag of node rank {}: {}",
                             bench_fabric::put_source(node_rank_, node_size_),
                             describe_counter_wait(source_world_rank_, 0, id, flag_->load()));
        }));
    return (MPI_Wtime() - start) * 1e6;
  }

 private:
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  int node_rank_ = 0;
  int node_size_ = 1;
  int source_world_rank_ = 0;
  std::atomic<std::uint64_t>* flag_ = nullptr;
  std::atomic<std::uint64_t>* peer_flag_ = nullptr;
  std::span<std::byte> data_;
  std::byte* peer_data_ = nullptr;
  std::uint64_t iteration_ = 0;
};

// One measured case: times per iteration (max over ranks) and, with -c, the wrong bytes over ranks.
struct Measured {
  RankTimes times;
  std::optional<CheckOutcome> check;
};

// `settle` runs after the last iteration, before the MPI exchange of the times: for puts the fabric barrier,
// because a rank that has its own completions may still have to drive progress for a peer's (providers
// such as tcp;ofi_rxm acknowledge delivery-complete puts only while the target polls).
template <typename Iteration, typename Settle>
Result<RankTimes> time_loop(const FabricPlan& plan, Iteration iteration, Settle settle, double scale) {
  for (int i = 0; i < plan.warmup; ++i) EPS_RETURN_IF_ERROR(iteration().status());
  std::vector<double> local(static_cast<std::size_t>(plan.iters));
  for (double& t : local) {
    EPS_ASSIGN_OR_RETURN(t, iteration());
    t *= scale;
  }
  EPS_RETURN_IF_ERROR(settle());
  return max_over_ranks(local, Deadline(plan.timeout));
}

// Sums the wrong bytes of every rank; the first message comes from the lowest rank with any.
Result<CheckOutcome> agree_check(const WrongBytes& wrong, int writer, std::string_view what,
                                 const Deadline& d) {
  std::string first;
  if (wrong.count > 0) {
    first = fmt::format("{}: rank {} byte {} (written by rank {}): expected 0x{:02x}, got 0x{:02x}", what,
                        mpi::rank(), *wrong.first_offset, writer, wrong.expected, wrong.got);
  }
  return agree_check_outcome(static_cast<std::int64_t>(wrong.count), first, d);
}

// -c for the puts: poison what the iteration will write, run it once more, compare with the writer's pattern.
template <typename Iteration>
Result<CheckOutcome> check_puts(PutEngine& e, const FabricPlan& plan, std::size_t checked_bytes, int writer,
                                std::string_view what, Iteration iteration) {
  const std::span<std::byte> dst = e.dst().first(checked_bytes);
  fill_poison(plan.seed, writer, 0, dst);
  EPS_RETURN_IF_ERROR(iteration().status());
  EPS_RETURN_IF_ERROR(e.barrier());  // every writer has its local completions: the bytes are placed
  return agree_check(count_wrong(plan.seed, writer, 0, dst), writer, what, Deadline(plan.timeout));
}

struct SizeResult {
  Measured bandwidth;
  Measured latency;
  Measured copy;
};

Result<SizeResult> measure_size(PutEngine& e, CopyEngine& copy, const FabricPlan& plan, std::size_t bytes) {
  SizeResult r;
  const auto bw = [&] { return bandwidth_iteration(e, plan, bytes); };
  const auto lat = [&] { return latency_iteration(e, plan, bytes); };
  const auto cp = [&] { return copy.iteration(e.src(), bytes, plan); };
  const auto fabric_barrier = [&] { return e.barrier(); };
  const auto nothing = [] { return Status(); };  // the copy's flags need no progress
  EPS_ASSIGN_OR_RETURN(r.bandwidth.times, time_loop(plan, bw, fabric_barrier, 1.0));
  EPS_ASSIGN_OR_RETURN(r.latency.times, time_loop(plan, lat, fabric_barrier, 0.5));
  EPS_ASSIGN_OR_RETURN(r.copy.times, time_loop(plan, cp, nothing, 1.0));
  if (!plan.check) return r;
  const std::size_t window_bytes = bench_fabric::window_slots(bytes, plan.window) * bytes;
  const int rank = mpi::rank();
  const int size = mpi::size();
  EPS_ASSIGN_OR_RETURN(r.bandwidth.check,
                       check_puts(e, plan, window_bytes, bench_fabric::put_source(rank, size), "put-bw", bw));
  EPS_ASSIGN_OR_RETURN(r.latency.check, check_puts(e, plan, bytes, bench_fabric::ping_partner(rank, size),
                                                   "put-latency", lat));
  fill_poison(plan.seed, copy.source_world_rank(), 0, copy.data().first(window_bytes));
  EPS_RETURN_IF_ERROR(cp().status());  // our flag is set after the writer's memcpy: its bytes are here
  EPS_ASSIGN_OR_RETURN(r.copy.check, agree_check(count_wrong(plan.seed, copy.source_world_rank(), 0,
                                                             copy.data().first(window_bytes)),
                                                 copy.source_world_rank(), "copy", Deadline(plan.timeout)));
  return r;
}

double p50(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return nearest_rank_percentile(times, 50);
}

bench_fabric::FabricRow table_row(const FabricPlan& plan, std::size_t bytes, const SizeResult& r) {
  bench_fabric::FabricRow row;
  row.size = static_cast<std::int64_t>(bytes);
  row.bytes = static_cast<std::int64_t>(bytes) * plan.window;
  row.put_p50_us = p50(r.bandwidth.times.times_us);
  row.put_gbps = bandwidth_gbps(static_cast<double>(row.bytes), row.put_p50_us);
  std::vector<double> lat = r.latency.times.times_us;
  std::sort(lat.begin(), lat.end());
  row.lat_p50_us = nearest_rank_percentile(lat, 50);
  row.lat_p99_us = nearest_rank_percentile(lat, 99);
  row.copy_p50_us = p50(r.copy.times.times_us);
  row.copy_gbps = bandwidth_gbps(static_cast<double>(row.bytes), row.copy_p50_us);
  row.slowest_rank = r.bandwidth.times.slowest_rank;
  if (plan.check) {
    row.wrong = r.bandwidth.check->mismatches + r.latency.check->mismatches + r.copy.check->mismatches;
  }
  return row;
}

CaseResult case_result(const std::string& fabric_name, const std::string& mode, std::size_t bytes, int window,
                       const Measured& m, bool to_self) {
  CaseResult c;
  c.op = "fabric";
  c.transport = fabric_name;
  c.mode = mode;
  c.dtype = "bytes";
  c.sizes = {{"bytes", static_cast<std::int64_t>(bytes)}, {"window", window}, {"ranks", mpi::size()}};
  c.times_us = m.times.times_us;
  c.algo_bytes = static_cast<double>(bytes) * window;
  c.physical_bytes = to_self ? 0.0 : c.algo_bytes;
  c.slowest_rank = m.times.slowest_rank;
  c.check = m.check;
  return c;
}

std::string pairing_text() {
  const int ranks = mpi::size();
  std::vector<std::string> puts;
  std::vector<std::string> pings;
  for (int r = 0; r < std::min(ranks, 8); ++r) {
    puts.push_back(fmt::format("{}->{}", r, bench_fabric::put_peer(r, ranks)));
    const int partner = bench_fabric::ping_partner(r, ranks);
    if (r <= partner) pings.push_back(fmt::format("{}<->{}", r, partner));
  }
  const char* more = ranks > 8 ? ", ..." : "";
  return fmt::format("puts rank r -> (r + R/2) % R ({}{}); ping-pong {}{}", fmt::join(puts, ", "), more,
                     fmt::join(pings, ", "), more);
}

std::string param_lines(const Params& params) {
  std::string all = params.header_block();
  std::string out;
  std::size_t begin = 0;
  while (begin < all.size()) {
    const std::size_t end = all.find('\n', begin);
    const std::string line = all.substr(begin, end - begin + 1);
    const std::string name = line.size() > 3 ? line.substr(3, line.find(' ', 3) - 3) : "";
    const auto& used = bench_fabric_param_names();
    if (std::find(used.begin(), used.end(), name) != used.end()) out += line;
    begin = end + 1;
  }
  return out;
}

std::string config_block(const FabricPlan& plan, const fabric::Fabric& f, const Params& params,
                         const Platform& platform) {
  std::vector<std::string> hosts;
  for (const RankPlatform& r : platform.ranks) {
    if (std::find(hosts.begin(), hosts.end(), r.host) == hosts.end()) hosts.push_back(r.host);
  }
  std::string out = fmt::format("# epsuite bench fabric (epsuite {}, git {}) on {} ranks, {} host(s)\n",
                                kSuiteVersion, kGitSha, mpi::size(), hosts.size());
  out += fmt::format("#  {:<16} {}: {}\n", "fabric", f.name(), f.describe());
  out += fmt::format("#  {:<16} {}\n", "pairs", pairing_text());
  out += fmt::format(
      "#  {:<16} a window of {} puts of SIZE bytes back to back, the last with an immediate; done at every "
      "local "
      "completion and the peer's immediate; GB/s = window * SIZE / p50\n",
      "put", plan.window);
  out +=
      fmt::format("#  {:<16} ping-pong of one put with an immediate each way; half the round trip\n", "lat");
  out += fmt::format(
      "#  {:<16} memcpy of the same window into the peer's MPI_Win_allocate_shared segment + a release flag "
      "(the host's limit); put/copy = put GB/s / copy GB/s\n",
      "copy");
  out += fmt::format(
      "#  {:<16} MPI_Wtime per rank; {} warm-up then {} timed iterations, barrier before each (the fabric's "
      "for puts, MPI for copy); time = max over ranks\n",
      "timer", plan.warmup, plan.iters);
  return out + param_lines(params);
}

Json config_json(const FabricPlan& plan, const Params& params, const fabric::Fabric& f) {
  Json all = params.to_json();
  Json config = Json::object();
  for (const std::string& name : bench_fabric_param_names()) config[name] = all[name];
  config["op"] = "fabric";
  config["fabric_name"] = f.name();
  config["fabric_describe"] = f.describe();
  config["fabric_ordered"] = f.ordered();
  config["region_bytes"] = plan.region_bytes;
  config["timer"] = "MPI_Wtime";
  return config;
}

// Creates the fabric, its two regions and the copy segments; every failure is agreed over ranks.
struct Setup {
  std::unique_ptr<fabric::Fabric> fabric;
  fabric::Region src;
  fabric::Region dst;
  std::unique_ptr<CopyEngine> copy = std::make_unique<CopyEngine>();
};

int setup(const FabricPlan& plan, Setup& s) {
  const Deadline deadline(plan.timeout);
  Result<std::unique_ptr<fabric::Fabric>> made =
      fabric::make_fabric(plan.fabric, MPI_COMM_WORLD, plan.timeout, plan.chaos);
  int code = mpi::agree_exit_code(made.status(), deadline);
  if (code != 0) return code;
  s.fabric = std::move(made).value();
  code = mpi::agree_exit_code(check_limits(plan, *s.fabric), deadline);
  if (code != 0) return code;
  Result<fabric::Region> src = s.fabric->allocate(plan.region_bytes);
  Result<fabric::Region> dst = src.ok() ? s.fabric->allocate(plan.region_bytes) : src;
  code = mpi::agree_exit_code(dst.status(), deadline);
  if (code != 0) return code;
  s.src = *src;
  s.dst = *dst;
  Status copy = s.copy->start(plan.region_bytes, deadline);
  if (copy.ok()) copy = s.copy->find_source(deadline);
  return mpi::agree_exit_code(copy, deadline);
}

}  // namespace

std::vector<ParamSpec> bench_fabric_param_specs() {
  std::vector<ParamSpec> s;
  s.push_back({.name = "sizes",
               .kind = ParamKind::kSweep,
               .default_text = "8:2097152:x4",
               .help = "bench fabric: message sizes in bytes, a:b:xF, a:b:+S or a list",
               .int_min = 1,
               .int_max = static_cast<std::int64_t>(fabric::kMaxPutBytes)});
  s.push_back({.name = "window",
               .kind = ParamKind::kInteger,
               .default_text = "64",
               .help = "bench fabric: puts posted back to back per bandwidth iteration",
               .int_min = 1,
               .int_max = 65536});
  return s;
}

const std::vector<std::string>& bench_fabric_param_names() {
  static const std::vector<std::string> kNames = {"fabric", "chaos", "sizes", "window",  "iters",
                                                  "warmup", "check", "seed",  "timeout", "json"};
  return kNames;
}

int run_bench_fabric(const Params& params, const Platform& platform, const std::vector<std::string>& argv) {
  const double timeout = params.number("timeout");
  Result<FabricPlan> plan = make_plan(params);
  int code = mpi::agree_exit_code(plan.status(), Deadline(timeout));
  if (code != 0) return code;
  Setup s;
  code = setup(*plan, s);
  if (code != 0) return code;

  std::optional<ResultsWriter> writer;
  Status status;
  const std::string& json_path = params.string("json");
  if (mpi::is_root() && !json_path.empty()) {
    writer.emplace(json_path,
                   make_run_header(argv, platform_to_json(platform), config_json(*plan, params, *s.fabric)));
    status = writer->start();
  }
  code = mpi::agree_exit_code(status, Deadline(timeout));
  if (code != 0) return code;

  fill_pattern(plan->seed, mpi::rank(), 0, s.src.local);
  PutEngine engine(*s.fabric, *plan, s.src, s.dst);
  mpi::root_print("{}", bench_fabric::fabric_table_header(config_block(*plan, *s.fabric, params, platform)));
  bool passed = true;
  const bool to_self = bench_fabric::put_peer(mpi::rank(), mpi::size()) == mpi::rank();
  for (std::int64_t size : plan->sizes) {
    const auto bytes = static_cast<std::size_t>(size);
    Result<SizeResult> r = measure_size(engine, *s.copy, *plan, bytes);
    if (!r.ok()) mpi::fatal(r.status());
    mpi::root_print("{}", bench_fabric::fabric_table_row(table_row(*plan, bytes, *r)));
    for (const Measured* m : {&r->bandwidth, &r->latency, &r->copy}) {
      if (m->check && !m->check->passed) {
        passed = false;
        mpi::root_print("# first mismatch: {}\n", m->check->first_mismatch.value_or(""));
      }
    }
    if (writer) {
      const std::string name = s.fabric->name();
      for (const CaseResult& c : {case_result(name, "put-bw", bytes, plan->window, r->bandwidth, to_self),
                                  case_result(name, "put-latency", bytes, 1, r->latency, to_self),
                                  case_result(name, "copy", bytes, plan->window, r->copy, to_self)}) {
        const Status written = writer->add_case(c);
        if (!written.ok()) mpi::fatal(written);
      }
    }
  }
  const Status done = s.fabric->barrier(Deadline(timeout));  // no rank tears the fabric down under a peer
  if (!done.ok()) mpi::fatal(done);
  return mpi::agree_exit_code(
      passed ? Status() : Status(StatusCode::kCheckFailed, "bench fabric -c found wrong bytes"),
      Deadline(timeout));
}

}  // namespace eps
