// EPLB at run time (docs/eplb.md 8.4-8.7): a distributed layer stack whose expert placement follows a policy
// while it runs, without changing any result.
//
// Every step runs the whole stack (distributed_layer.hpp) at workload step `step` under the placement in
// force; the transport sees the P physical slots as its experts and each (token, k) goes to the replica the
// spec's replica rule picks (docs/eplb.md 8.4). After each step, at the step boundary (collective over the
// layer's communicator, every wait under the deadline):
//   1. loads    every lb_interval steps the window's per-expert loads (kept (token, slot) pairs, per layer,
//               per source rank) are summed over the ranks; rank 0 sends them to the planner as a `plan`
//               request unless a plan is still on its way (requested, not yet switched to).
//   2. planner  rank 0 takes whatever the planner has answered meanwhile, without waiting.
//   3. plan     a new placement is broadcast; every slot whose expert changes receives that expert's weights
//               from a holder in the old placement (same rank, else same node, else the lowest slot) over
//               MPI on a communicator of its own; the transfers progress at later boundaries while steps
//               go on. Each arriving expert is checked bit for bit against the weights generated from
//               (seed, layer, expert) and staged on the device.
//   4. staged   when every rank has staged every move (and finished its sends), rank 0 tells the planner,
//               which announces the switch step; all ranks switch together at that step boundary.
// Outputs stay bit-equal to the single-process reference before, during and after a rebalance: replicas hold
// identical weights and the ll-weighted tree does not depend on the placement (docs/layer.md 4.3). The
// ht-rank-major layout (ht-rank tree, which depends on the placement) is refused.
//
// The planner is a thread of rank 0 (an in-process planner::PlannerServer on 127.0.0.1, keyed by
// EPSUITE_EPLB_KEY or a random key) or a separate `epsuite planner` named by `planner_address` (the key then
// must be in EPSUITE_EPLB_KEY).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "impls/device/device.hpp"
#include "impls/layer/distributed_layer.hpp"
#include "impls/layer/layer_spec.hpp"
#include "impls/transport/transport.hpp"
#include "reference/eplb/metrics.hpp"
#include "reference/eplb/placement.hpp"

namespace eps::layer {

inline constexpr int kMaxLbInterval = 1 << 20;

struct EplbConfig {
  std::string policy = "deepseek";  // a registered eplb policy (reference/eplb/policy.hpp)
  int lb_interval = 4;              // steps per load window, [1, kMaxLbInterval]
  int num_groups = 1;               // deepseek expert groups G (E % G == 0)
  int max_move = 8;                 // mindie-ex
  double threshold = 0;             // mindie-ex
  std::string planner_address;      // "HOST:PORT" of `epsuite planner`; empty = a planner thread on rank 0
  double planner_reply_delay_seconds = 0;  // the planner thread answers this late (tests: a late planner)
  double timeout_seconds = 60;             // every wait of the boundary
  // Called on every rank at events of the boundary (tests inject failures here).
  enum class Event { kMovesPosted, kSwitched };
  std::function<void(Event)> on_event;
};

// What one rank saw in one step.
struct EplbStepRecord {
  std::int64_t step = 0;
  std::vector<StepRecord> layers;  // per layer (distributed_layer.hpp)
  double stack_us = 0;             // this rank's time of the layer stack
  double boundary_us = 0;          // this rank's time at the boundary after the step
  std::uint64_t plan = 0;          // the plan in force during the step (0: the initial static placement)
  bool window_end = false;         // a load window closed at this step's boundary
  bool switched = false;           // a new placement took effect at this step's boundary
};

// A closed load window (the same on every rank).
struct WindowRecord {
  int index = 0;
  std::int64_t last_step = 0;
  std::uint64_t plan = 0;                            // the plan in force at its end
  eplb::LoadRows loads;                              // [layers][E] summed over ranks
  eplb::Balancedness realized;                       // the placement in force under these loads (even split)
  std::vector<std::vector<std::int64_t>> rank_rows;  // [layers][R] (row, expert) pairs each rank computed
};

// One plan, from request to switch (the same on every rank; -1 = not reached yet).
struct RebalanceRecord {
  std::uint64_t request = 0;
  std::int64_t requested_after_step = -1;
  std::int64_t adopted_after_step = -1;  // the placement reached every rank; moves start
  std::int64_t staged_after_step = -1;   // every rank staged every move
  std::int64_t switch_step = -1;         // the first step run under the new placement
  double planner_us = 0;                 // the policy's run time in the planner
  eplb::MoveCounts moved;                // experts moved per docs/eplb.md 8.5
  eplb::MoveBytes moved_bytes;
  eplb::Balancedness predicted;  // under the loads it was planned from
  double switch_us = 0;          // this rank's boundary time of the switch (the pipeline stall)
};

class EplbRuntime {
 public:
  // Collective over spec's ranks. `transport` must be made with layer_transport_config(spec, ...) on
  // `device`; spec.layout must not be ht-rank-major. The initial placement is the static one.
  static Result<std::unique_ptr<EplbRuntime>> create(const LayerSpec& spec, const EplbConfig& config,
                                                     transport::Transport& transport, device::Device& device,
                                                     int rank);
  ~EplbRuntime();

  // Collective: runs step `next_step()` and its boundary.
  Result<EplbStepRecord> step();
  std::int64_t next_step() const { return next_step_; }
  // The last step's output [T_r, H], on the host.
  Result<std::vector<bf16>> output() const;

  const eplb::Placement& placement() const;
  const std::vector<WindowRecord>& windows() const { return windows_; }
  const std::vector<RebalanceRecord>& rebalances() const { return rebalances_; }
  // The spec with `step` set (what the reference needs for that step).
  LayerSpec spec_at(std::int64_t step) const;

 private:
  struct Moves;
  struct Planner;
  EplbRuntime(const LayerSpec& spec, const EplbConfig& config, transport::Transport& transport,
              device::Device& device, int rank);
  Status start();
  Status check_policy() const;
  Status connect_planner();
  Status boundary(EplbStepRecord& record);
  Status close_window(EplbStepRecord& record);
  Status request_plan();
  Status poll_planner();
  Status adopt_plan(std::uint64_t request);
  Status post_moves();
  Status progress_moves();
  Status stage_arrival(int index);
  Status switch_plan(EplbStepRecord& record);

  LayerSpec spec_;
  EplbConfig config_;
  transport::Transport& transport_;
  device::Device& device_;
  int rank_;
  int ranks_;
  int ranks_per_node_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // moves and control, apart from the transport's traffic
  std::unique_ptr<DistributedLayer> layer_;
  std::unique_ptr<Planner> planner_;                      // rank 0
  std::unique_ptr<Moves> moves_;                          // the plan being staged
  std::vector<std::vector<ExpertWeights>> slot_weights_;  // [layer][local slot] host copy, the move source
  std::int64_t next_step_ = 0;
  std::uint64_t plan_ = 0;  // the plan in force
  double boundary_start_us_ = 0;
  std::vector<std::vector<std::int64_t>> window_load_;  // [layers][E] this rank's loads so far in the window
  std::vector<std::int64_t> window_rows_;               // [layers] this rank's expert rows so far
  int window_steps_ = 0;
  std::vector<WindowRecord> windows_;
  std::vector<RebalanceRecord> rebalances_;
};

}  // namespace eps::layer
