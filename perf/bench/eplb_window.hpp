// The machinery of `epsuite bench eplb` (perf/bench/op_eplb.cpp), as fabric_engine.hpp is bench fabric's:
// - WindowMeasurement: one load window of an EplbRuntime, each step one timed iteration (Iterations{0,
// steps}:
//   no warm-up, the steps are successive states), its time the stack's (EplbStepRecord::stack_us); with -c
//   each step's output is compared bit for bit with the single-process reference of runtime.spec_at(step).
// - StepReferences: those references, [T, H] of each step's stack, shared by every series, because the
//   placement never changes the output (docs/eplb.md 8.4), so a step's reference is the same under every
//   policy. Each missing step is computed on one rank (the i-th missing step on rank i mod R) and broadcast;
//   at most about 1 GiB is kept, the lowest steps outside the range asked for dropped first (and recomputed
//   when asked again).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "impls/layer/eplb_runtime.hpp"
#include "impls/layer/layer_spec.hpp"
#include "perf/bench/bench_op.hpp"
#include "reference/common/status.hpp"
#include "reference/numerics/bf16.hpp"

namespace eps::bench {

class StepReferences {
 public:
  // Collective: computes the missing ones of steps [first, first + count) (spec_at(step) gives each step's
  // spec), each on one rank (the i-th missing step on rank i mod R), and broadcasts them.
  Status ensure(std::int64_t first, int count, const std::function<layer::LayerSpec(std::int64_t)>& spec_at,
                double timeout);
  const std::vector<bf16>& at(std::int64_t step) const { return outputs_.at(step); }

 private:
  std::map<std::int64_t, std::vector<bf16>> outputs_;
};

// What one step left on this rank, and after settle() the maxima over ranks.
struct StepSummary {
  std::int64_t step = 0;
  double stack_us = 0;
  double boundary_us = 0;
  std::int64_t wire_received = 0;  // over the stack's layers
};

// A switch at one of the window's step boundaries, with its stall (max over ranks).
struct Switch {
  layer::RebalanceRecord record;
  double stall_us = 0;
};

class WindowMeasurement final : public Measurement {
 public:
  WindowMeasurement(layer::EplbRuntime& runtime, StepReferences& references, int steps, double timeout)
      : runtime_(runtime), references_(references), steps_(steps), timeout_(timeout) {}

  std::optional<Iterations> iterations() const override { return Iterations{0, steps_}; }

  Status prepare(int iteration, bool checking) override;  // with -c, the window's references first
  Result<double> run(int iteration) override;
  Result<Mismatches> check(int iteration) override;
  // The boundary times and the stalls of the switches at the window's boundaries (max over ranks), and the
  // wire bytes every rank received over the window.
  Status settle() override;

  const std::vector<StepSummary>& steps() const { return steps_done_; }
  const std::vector<Switch>& switches() const { return switches_; }
  const std::vector<std::int64_t>& wire_received() const { return wire_received_; }

 private:
  layer::EplbRuntime& runtime_;
  StepReferences& references_;
  int steps_;
  double timeout_;
  std::vector<StepSummary> steps_done_;
  std::vector<Switch> switches_;
  std::vector<std::int64_t> wire_received_;  // [rank], summed over the window
};

}  // namespace eps::bench
