// Figures of merit of a placement (docs/eplb.md 8.5).
//
// Rank load (even split): load_r = sum over the slots s of rank r of load[phy2log[s]] / logcnt[phy2log[s]]
// (float64, ascending slot order), i.e. each expert's tokens split evenly over its replicas.
// Balancedness of a layer: beta = mean_r load_r / max_r load_r, in (0, 1]; a layer whose ranks all carry
// zero load has beta = 1 (perfectly balanced). Aggregate: sum_l mean_l / sum_l max_l (1 when every max is
// 0). Imbalance = 1 / beta.
//
// Moved experts between two placements of the same shape, per layer and slot p whose expert changes
// (to[p] != from[p]): the new expert's weights must be copied into p from a slot that held it in `from`;
// the move counts as same_rank when some replica of it was on p's rank, else same_node when one was on
// p's node (ranks_per_node consecutive ranks), else cross_node. Slots that keep their expert move nothing.
// Moved bytes = the counts times bytes_per_expert.
//
// Predicted versus realized balancedness: beta of the placement under the loads it was planned from, and
// under the next window's loads.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/eplb/placement.hpp"

namespace eps::eplb {

using LoadRows = std::vector<std::vector<double>>;  // [layers][E], finite values >= 0

// [layers][R] even-split rank loads; errors name "weight" (shape or value).
Result<LoadRows> rank_loads(const Placement& placement, const LoadRows& load);

struct Balancedness {
  std::vector<double> per_layer;  // beta_l
  double aggregate = 1.0;         // sum mean / sum max
};
Balancedness balancedness_of(const LoadRows& rank_load);
Result<Balancedness> balancedness(const Placement& placement, const LoadRows& load);
inline double imbalance(double beta) { return 1.0 / beta; }

struct MoveCounts {
  std::int64_t same_rank = 0;
  std::int64_t same_node = 0;
  std::int64_t cross_node = 0;
  std::int64_t total() const { return same_rank + same_node + cross_node; }
};
struct MoveBytes {
  double same_rank = 0, same_node = 0, cross_node = 0;
  double total() const { return same_rank + same_node + cross_node; }
};

// Errors: "to" when the shapes differ, "ranks_per_node" when it does not divide R.
Result<MoveCounts> moved_experts(const Placement& from, const Placement& to, int ranks_per_node);
MoveBytes moved_bytes(const MoveCounts& counts, double bytes_per_expert);

struct BalanceForecast {
  Balancedness predicted;  // under the loads the placement was planned from
  Balancedness realized;   // under the next window's loads
};
Result<BalanceForecast> predicted_vs_realized(const Placement& placement, const LoadRows& planned,
                                              const LoadRows& next_window);

}  // namespace eps::eplb
