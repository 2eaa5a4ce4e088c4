// `epsuite bench fabric --fabric NAME [--chaos SPEC]`: the ceiling of a fabric (the perftest / fi_rma_bw
// analogue) next to the physical limit of the host, so that a transport's GB/s can be read against both.
// Pairing, pattern and engines: perf/bench/fabric_engine.hpp.
//
// Per message size s of --sizes (bytes, 1 .. fabric::kMaxPutBytes and at most the fabric's largest put):
//   put-bw       after a fabric barrier, each rank posts --window puts of s bytes back to back (retrying on
//                backpressure while polling), the last one with an immediate, and waits for every local
//                completion and for the immediate from put_source(r). GB/s = window * s / p50.
//   put-latency  after a fabric barrier, one put of s bytes with an immediate each way; the time is half the
//                round trip (one-way latency, p50 / p99).
//   copy         after an MPI barrier, each rank memcpy's the same window into the MPI_Win_allocate_shared
//                segment of its node-local peer and sets a release flag there; it waits for its own flag.
// With -c every iteration's source bytes are pattern_byte(seed + iteration, writer, offset), the destination
// is poisoned (the complement of the expected bytes) before it, and after it (and a fabric barrier, so every
// put is placed) the destination bytes that differ from the writer's pattern are counted (#wrong).
//
// Output: the fabric table (perf/bench/table.hpp) and per size three cases, op "fabric", transport = the
// fabric's name ("shm", "chaos(libfabric:tcp)"), mode "put-bw", "put-latency" or "copy", dtype "bytes",
// sizes {bytes, window, ranks}, bytes {algo: moved by one rank, physical: the same unless the rank writes to
// itself}.
#include <algorithm>

#include <fmt/format.h>

#include "impls/fabric/fabric_registry.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "perf/bench/bench_flags.hpp"
#include "perf/bench/bench_op.hpp"
#include "perf/bench/fabric_engine.hpp"
#include "perf/bench/table.hpp"
#include "perf/bench/timer.hpp"

namespace eps::bench {
namespace {

using namespace bench_fabric;  // NOLINT: this file is the op of that machinery

// Fabric and regions of the whole series.
struct FabricState {
  std::unique_ptr<fabric::Fabric> fabric;
  std::unique_ptr<PutEngine> puts;
  CopyEngine copy;
};

// One measurement of one size. `writer` is the rank whose bytes land in this rank's destination.
class FabricMeasurement : public Measurement {
 public:
  FabricMeasurement(FabricState& state, const FabricPlan& plan, std::size_t bytes, std::size_t checked,
                    int writer)
      : state_(state), plan_(plan), bytes_(bytes), checked_(checked), writer_(writer) {}

  Status prepare(int iteration, bool checking) override {
    if (!checking) return Status();
    fill_pattern(seed_of(iteration), mpi::rank(), 0, source().first(checked_));
    fill_poison(seed_of(iteration), writer_, 0, destination().first(checked_));
    return Status();
  }
  Status sync(const Deadline&) override { return state_.puts->barrier(); }
  // A rank with its own completions may still have to drive progress for a peer's (providers such as
  // tcp;ofi_rxm acknowledge delivery-complete puts only while the target polls): settle on a fabric barrier.
  Status settle() override { return state_.puts->barrier(); }
  Result<Mismatches> check(int iteration) override {
    EPS_RETURN_IF_ERROR(state_.puts->barrier());  // every writer has its local completions: bytes are placed
    const WrongBytes wrong = count_wrong(seed_of(iteration), writer_, 0, destination().first(checked_));
    if (wrong.count == 0) return Mismatches{};
    return Mismatches{wrong.count,
                      fmt::format("byte {} (written by rank {}): expected 0x{:02x}, got 0x{:02x}",
                                  *wrong.first_offset, writer_, wrong.expected, wrong.got)};
  }

 protected:
  std::uint64_t seed_of(int iteration) const { return plan_.seed + static_cast<std::uint64_t>(iteration); }
  virtual std::span<std::byte> source() { return state_.puts->src(); }
  virtual std::span<std::byte> destination() { return state_.puts->dst(); }

  FabricState& state_;
  const FabricPlan& plan_;
  std::size_t bytes_;
  std::size_t checked_;
  int writer_;
};

class PutBandwidth final : public FabricMeasurement {
 public:
  using FabricMeasurement::FabricMeasurement;
  Result<double> run(int) override {
    PutEngine& e = *state_.puts;
    const int peer = put_peer(mpi::rank(), mpi::size());
    const std::size_t slots = window_slots(bytes_, plan_.window);
    const std::int64_t remote = e.remote_seen() + 1;
    const Deadline deadline(plan_.timeout);
    return timed_us([&]() -> Status {
      for (int i = 0; i < plan_.window; ++i) {
        EPS_RETURN_IF_ERROR(
            e.post(peer, bytes_, static_cast<std::size_t>(i) % slots, i + 1 == plan_.window, deadline));
      }
      return e.wait(remote, put_source(mpi::rank(), mpi::size()), deadline);
    });
  }
};

// The lower rank of a pair pings first; a rank paired with itself plays both parts. Local completions are
// collected after the clock stops.
class PutLatency final : public FabricMeasurement {
 public:
  using FabricMeasurement::FabricMeasurement;
  Result<double> run(int) override {
    PutEngine& e = *state_.puts;
    const int partner = ping_partner(mpi::rank(), mpi::size());
    const bool self = partner == mpi::rank();
    std::int64_t remote = e.remote_seen();
    const Deadline deadline(plan_.timeout);
    EPS_ASSIGN_OR_RETURN(const double round_trip, timed_us([&]() -> Status {
                           if (self || mpi::rank() < partner) {
                             EPS_RETURN_IF_ERROR(e.post(partner, bytes_, 0, true, deadline));
                             EPS_RETURN_IF_ERROR(e.wait_remote(++remote, partner, deadline));
                           }
                           if (self || mpi::rank() > partner) {
                             if (!self) EPS_RETURN_IF_ERROR(e.wait_remote(++remote, partner, deadline));
                             EPS_RETURN_IF_ERROR(e.post(partner, bytes_, 0, true, deadline));
                             if (self) EPS_RETURN_IF_ERROR(e.wait_remote(++remote, partner, deadline));
                           }
                           return Status();
                         }));
    EPS_RETURN_IF_ERROR(e.wait(remote, partner, deadline));
    return round_trip / 2;
  }
};

class Copy final : public FabricMeasurement {
 public:
  using FabricMeasurement::FabricMeasurement;
  Status sync(const Deadline& deadline) override { return mpi::barrier(MPI_COMM_WORLD, deadline); }
  Status settle() override { return Status(); }  // the copy's flags need no progress
  Result<double> run(int) override {
    return state_.copy.iteration(source(), bytes_, plan_.window, plan_.timeout);
  }
  // Our flag is set after the writer's memcpy: its bytes are here without a barrier.
  Result<Mismatches> check(int iteration) override {
    const WrongBytes wrong = count_wrong(seed_of(iteration), writer_, 0, destination().first(checked_));
    if (wrong.count == 0) return Mismatches{};
    return Mismatches{wrong.count,
                      fmt::format("copy byte {} (written by rank {}): expected 0x{:02x}, got 0x{:02x}",
                                  *wrong.first_offset, writer_, wrong.expected, wrong.got)};
  }

 protected:
  std::span<std::byte> destination() override { return state_.copy.data(); }
};

class FabricPoint final : public BenchPoint {
 public:
  FabricPoint(FabricState& state, const FabricPlan& plan, std::size_t bytes) : plan_(plan), bytes_(bytes) {
    const std::size_t window_bytes = window_slots(bytes, plan.window) * bytes;
    const int rank = mpi::rank();
    bandwidth_ =
        std::make_unique<PutBandwidth>(state, plan, bytes, window_bytes, put_source(rank, mpi::size()));
    latency_ = std::make_unique<PutLatency>(state, plan, bytes, bytes, ping_partner(rank, mpi::size()));
    copy_ = std::make_unique<Copy>(state, plan, bytes, window_bytes, state.copy.source_world_rank());
  }

  std::vector<Measurement*> measurements() override {
    return {bandwidth_.get(), latency_.get(), copy_.get()};
  }

  // Columns size, bytes, put p50 and GB/s, latency p50 and p99, copy p50 and GB/s, put/copy (fabric_table);
  // three cases: put-bw, put-latency and copy.
  PointReport report(std::span<const Measured> m) const override {
    const auto size = static_cast<std::int64_t>(bytes_);
    const std::int64_t bytes = size * plan_.window;
    const double put_us = percentile_us(m[0], 50);
    const double put_gbps = bandwidth_gbps(static_cast<double>(bytes), put_us);
    const double copy_us = percentile_us(m[2], 50);
    const double copy_gbps = bandwidth_gbps(static_cast<double>(bytes), copy_us);
    return {{size, bytes, put_us, put_gbps, percentile_us(m[1], 50), percentile_us(m[1], 99), copy_us,
             copy_gbps, put_copy_ratio(put_gbps, copy_gbps)},
            {parts(0, "put-bw", plan_.window), parts(1, "put-latency", 1), parts(2, "copy", plan_.window)}};
  }

 private:
  CaseParts parts(std::size_t measured, std::string mode, int window) const {
    const bool to_self = put_peer(mpi::rank(), mpi::size()) == mpi::rank();
    CaseParts c;
    c.measured = measured;
    c.mode = std::move(mode);
    c.sizes = {{"bytes", static_cast<std::int64_t>(bytes_)}, {"window", window}};
    c.algo_bytes = static_cast<double>(bytes_) * window;
    c.physical_bytes = to_self ? 0.0 : c.algo_bytes;
    return c;
  }

  const FabricPlan& plan_;
  std::size_t bytes_;
  std::unique_ptr<FabricMeasurement> bandwidth_, latency_, copy_;
};

std::string pairing_text() {
  const int ranks = mpi::size();
  std::vector<std::string> puts;
  std::vector<std::string> pings;
  for (int r = 0; r < std::min(ranks, 8); ++r) {
    puts.push_back(fmt::format("{}->{}", r, put_peer(r, ranks)));
    const int partner = ping_partner(r, ranks);
    if (r <= partner) pings.push_back(fmt::format("{}<->{}", r, partner));
  }
  const char* more = ranks > 8 ? ", ..." : "";
  return fmt::format("puts rank r -> (r + R/2) % R ({}{}); ping-pong {}{}", fmt::join(puts, ", "), more,
                     fmt::join(pings, ", "), more);
}

class FabricSeries final : public BenchSeries {
 public:
  explicit FabricSeries(std::shared_ptr<const FabricPlan> plan) : plan_(std::move(plan)) {}

  // Collective: the fabric, its two regions and the copy segments.
  Status start() {
    const FabricPlan& p = *plan_;
    EPS_ASSIGN_OR_RETURN(state_.fabric, fabric::make_fabric(p.selection, MPI_COMM_WORLD, p.timeout));
    const std::size_t max_put = state_.fabric->limits().max_put_bytes;
    for (std::int64_t s : p.sizes) {
      if (static_cast<std::size_t>(s) > max_put) {
        return invalid_argument("--sizes", "{} bytes exceed the largest put of {} ({} bytes)", s,
                                state_.fabric->name(), max_put);
      }
    }
    EPS_ASSIGN_OR_RETURN(const fabric::Region src, state_.fabric->allocate(p.region_bytes));
    EPS_ASSIGN_OR_RETURN(const fabric::Region dst, state_.fabric->allocate(p.region_bytes));
    fill_pattern(p.seed, mpi::rank(), 0, src.local);
    state_.puts = std::make_unique<PutEngine>(*state_.fabric, src, dst, p.timeout);
    return state_.copy.start(p.region_bytes, Deadline(p.timeout));
  }
  ~FabricSeries() override {
    if (!state_.puts) return;
    const Status done = state_.puts->barrier();  // no rank tears the fabric down under a peer
    if (!done.ok()) mpi::fatal(done);
  }

  SeriesInfo info() const override {
    const fabric::Fabric& f = *state_.fabric;
    SeriesInfo info;
    info.echo = {
        {"fabric", fmt::format("{}: {}", f.name(), f.describe())},
        {"pairs", pairing_text()},
        {"put", fmt::format("a window of {} puts of SIZE bytes back to back, the last with an immediate; "
                            "done at every local completion and the peer's immediate; GB/s = window * "
                            "SIZE / p50",
                            plan_->window)},
        {"lat", "ping-pong of one put with an immediate each way; half the round trip"},
        {"copy",
         "memcpy of the same window into the peer's MPI_Win_allocate_shared segment + a release "
         "flag (the host's limit); put/copy = put GB/s / copy GB/s"},
        {"timer",
         "MPI_Wtime per rank; barrier before each iteration (the fabric's for puts, MPI for "
         "copy); time = max over ranks"}};
    info.table = fabric_table();
    info.base.op = "fabric";
    info.base.transport = f.name();
    info.base.dtype = "bytes";
    info.base.sizes = {{"ranks", mpi::size()}};
    // The fabric without the chaos decorator: the "fabric" identity.
    info.base.identity = {{"fabric", fabric::undecorated_name(f)},
                          {"chaos", plan_->selection.chaos.empty() ? "off" : plan_->selection.chaos},
                          {"seed", std::to_string(plan_->seed)}};
    return info;
  }
  int num_points() const override { return static_cast<int>(plan_->sizes.size()); }
  Result<std::unique_ptr<BenchPoint>> make_point(int index) override {
    const auto bytes = static_cast<std::size_t>(plan_->sizes[static_cast<std::size_t>(index)]);
    return std::unique_ptr<BenchPoint>(std::make_unique<FabricPoint>(state_, *plan_, bytes));
  }

 private:
  std::shared_ptr<const FabricPlan> plan_;
  FabricState state_;
};

Result<std::vector<SeriesPlan>> plan(const BenchContext& context, Json& config) {
  EPS_ASSIGN_OR_RETURN(std::shared_ptr<const FabricPlan> plan, make_fabric_plan(context, config));
  return std::vector<SeriesPlan>{{plan->selection.fabric,
                                  [plan]() -> Result<std::unique_ptr<BenchSeries>> {
                                    auto series = std::make_unique<FabricSeries>(plan);
                                    EPS_RETURN_IF_ERROR(series->start());
                                    return std::unique_ptr<BenchSeries>(std::move(series));
                                  },
                                  context.params.source("fabric") != ParamSource::kDefault}};
}

}  // namespace
}  // namespace eps::bench

void eps_register_bench_op_fabric(eps::bench::BenchOpRegistry& registry) {
  registry.add({"fabric", "raw puts of --fabric against a shared-memory copy", eps::bench::fabric_params,
                eps::bench::plan});
}
