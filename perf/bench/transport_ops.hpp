// What the transport ops (op_dispatch.cpp, op_combine.cpp, op_roundtrip.cpp) share: the series (one per
// selected transport, one point per swept token count T with every rank holding T tokens; their plan is
// perf/bench/bench_flags.hpp's TransportPlan), the table's cells and the case parts, and `TransportWork`, the
// state an iteration works on. Each op file only says what one iteration does (a Measurement) and which bytes
// it moves.
//
// Inputs follow docs/numerics.md 2: routing from the seeded --workload generator, payloads from the seed.
// Without -c every iteration sends the payload of iteration 0 (what is sent does not change the time); with
// -c iteration i sends the payload of seed + 1 + i and its outputs are poisoned first (NaN rows, -7 indices),
// so a transport that stops writing, or writes last iteration's data, is caught (docs/dispatch.md 5.7).
//
// Modes: --mode ht with --layout rank-major (ht-rank combine, ht-two-level when there is more than one node)
// or expert-major (ll-weighted); --mode ll (ll-weighted). Bytes are those received by the slowest rank
// (docs/dispatch.md 5.6): `algo` from reference/dispatch (payload and scales, rows to itself included),
// `physical` as the transport reports putting them on the wire from other ranks (headers, signals, count
// exchanges and padding included). Every point also times the machine's ceiling (perf/bench/ceiling.hpp):
// the shared-memory copy of the op's algo bytes between the same ranks (transport_bytes of the point's
// routing), so a row reads as a fraction of what the host allows.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "impls/device/device.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "impls/problem/transport_problem.hpp"
#include "impls/transport/transport.hpp"
#include "perf/bench/bench_flags.hpp"
#include "perf/bench/bench_op.hpp"
#include "perf/bench/ceiling.hpp"
#include "perf/bench/presets.hpp"
#include "perf/bench/timer.hpp"
#include "reference/dispatch/byte_accounting.hpp"

namespace eps::bench {

// One point of one transport: the problem at T tokens per rank, the caller-owned buffers, the last handle.
class TransportWork {
 public:
  TransportWork(transport::Transport& transport, const TransportPlan& plan, problem::Problem problem);

  transport::Transport& transport() { return transport_; }
  const TransportPlan& plan() const { return plan_; }
  // The problem iteration i sends: with `checking`, its own payload; otherwise iteration 0's.
  const problem::Problem& problem() const { return current_ ? *current_ : base_; }
  Status use_payload_of(int iteration, bool checking);

  // Untimed helpers of the measurements.
  void poison_dispatch_outputs();
  void poison_combine_output();
  Status dispatch();              // a fresh dispatch of problem() into the buffers; keeps the handle
  void compute_expert_outputs();  // expert_y from what this rank received (problem::expert_outputs)
  Status combine();               // combine of expert_y along the handle into out
  Mismatches dispatch_mismatches() const;
  Result<Mismatches> combine_mismatches() const;

  // docs/dispatch.md 5.6 physical bytes as the transport put them on the wire: start_wire() at the end of
  // prepare, gather_wire() (collective) in settle; wire_received(r) = rank r's received bytes of one
  // iteration (the last).
  void start_wire() { wire_start_ = transport_.wire_bytes(); }
  Status gather_wire(double timeout_seconds);
  std::int64_t wire_received(int rank) const { return wire_received_.at(static_cast<std::size_t>(rank)); }

 private:
  transport::Transport& transport_;
  const TransportPlan& plan_;
  problem::Problem base_;
  std::optional<problem::Problem> current_;
  problem::DispatchBuffers buffers_;
  std::unique_ptr<transport::DispatchHandle> handle_;
  std::vector<bf16> expert_y_;
  std::vector<bf16> out_;
  transport::WireBytes wire_start_;
  std::vector<std::int64_t> wire_received_;
};

using MeasurementFactory = std::unique_ptr<Measurement> (*)(TransportWork& work);

// Validates the flags and returns one series per selected transport; `make` builds an iteration's
// measurement, `traffic` says which bytes it moves.
Result<std::vector<SeriesPlan>> plan_transport_op(const BenchContext& context, Json& config,
                                                  MeasurementFactory make, TrafficOf traffic);

// One series per transport of --transport, each made by `make` from the transport's name: named when the user
// listed transports, with the proxy's helper threads of `fabric` (the layer op's series too).
using TransportSeriesFactory = std::function<Result<std::unique_ptr<BenchSeries>>(const std::string& name)>;
Result<std::vector<SeriesPlan>> one_series_per_transport(const Params& params,
                                                         const fabric::FabricSelection& fabric,
                                                         const TransportSeriesFactory& make);

}  // namespace eps::bench
