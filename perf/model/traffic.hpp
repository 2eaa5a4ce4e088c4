// The traffic of one dispatch and one combine at one EP size (docs/model.md 16.3), from the suite's own
// routing: the routing of every rank is generated exactly as `epsuite bench` generates it (impls/problem
// Problem::make: the docs/numerics.md 2.3 workload, every rank holding `tokens` tokens, seed `seed`, step 0),
// and the per-pair byte matrix is the one of the bench's ceiling (perf/bench/ceiling.hpp transport_bytes:
// docs/dispatch.md 5.6 `algo` bytes, rows a rank sends to itself included).
//
// From the matrix bytes[src][dst] and the node of each rank (rank / ranks_per_node):
//   busiest_rank_bytes   max over ranks of (sent + received), the x of the operation's cost line
//   busiest_pair_bytes   max over src != dst of bytes[src][dst] (the busiest rank-to-rank link)
//   self, intra, inter   Σ bytes a rank sends itself / to another rank of its node / to another node
//   busiest_rank_inter   max over ranks of the inter-node bytes it sends plus those it receives
//   max_peers            the most other ranks one rank sends bytes to
//   balancedness         mean over ranks of received bytes / their maximum (1 = every rank receives as much;
//                        the EPLB balancedness of docs/eplb.md for the placement E / R experts per rank)
// Errors: the shape refused by Problem::make / DispatchPlan::make (kInvalidArgument naming the field).
#pragma once

#include <cstdint>
#include <string>

#include "reference/common/status.hpp"
#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/node_layout.hpp"

namespace eps::model {

struct TrafficShape {
  int ranks = 1;
  int ranks_per_node = 1;
  int experts = 1;
  int top_k = 1;
  int hidden = 1;
  int tokens = 0;      // per rank
  int max_tokens = 0;  // T_max
  dispatch::PayloadType dtype = dispatch::PayloadType::kBf16;
  bool per_selection =
      false;  // expert-major and LL layouts: one unit per valid selection (docs/dispatch.md 5.6)
  std::string workload = "uniform";
  std::uint64_t seed = 1;
};

struct OpTraffic {
  double busiest_rank_bytes = 0;
  double busiest_pair_bytes = 0;
  double self_bytes = 0;
  double intra_bytes = 0;
  double inter_bytes = 0;
  double busiest_rank_inter_bytes = 0;
  int max_peers = 0;
  double balancedness = 1;
};

struct Traffic {
  OpTraffic dispatch;
  OpTraffic combine;
};

// Nodes of ranks_per_node consecutive ranks, the last one smaller when it does not divide ranks; empty (one
// rank per node) for ranks_per_node <= 0.
NodeLayout consecutive_nodes(int ranks, int ranks_per_node);

Result<Traffic> op_traffic(const TrafficShape& shape);

}  // namespace eps::model
