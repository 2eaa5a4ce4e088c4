#include "perf/model/traffic.hpp"

#include <algorithm>

#include "impls/problem/transport_problem.hpp"
#include "perf/bench/ceiling.hpp"

namespace eps::model {
namespace {

OpTraffic summarize(const bench::ByteMatrix& m, int ranks_per_node) {
  OpTraffic t;
  const int ranks = m.ranks();
  std::vector<double> inter_of(static_cast<std::size_t>(ranks), 0.0);
  double received_sum = 0, received_max = 0;
  for (int src = 0; src < ranks; ++src) {
    int peers = 0;
    for (int dst = 0; dst < ranks; ++dst) {
      const auto bytes = static_cast<double>(m.at(src, dst));
      if (src == dst) {
        t.self_bytes += bytes;
        continue;
      }
      if (bytes > 0) ++peers;
      t.busiest_pair_bytes = std::max(t.busiest_pair_bytes, bytes);
      if (src / ranks_per_node == dst / ranks_per_node) {
        t.intra_bytes += bytes;
      } else {
        t.inter_bytes += bytes;
        inter_of[static_cast<std::size_t>(src)] += bytes;
        inter_of[static_cast<std::size_t>(dst)] += bytes;
      }
    }
    t.max_peers = std::max(t.max_peers, peers);
  }
  for (int r = 0; r < ranks; ++r) {
    const auto received = static_cast<double>(m.received_by(r));
    received_sum += received;
    received_max = std::max(received_max, received);
    t.busiest_rank_bytes = std::max(t.busiest_rank_bytes, static_cast<double>(m.sent_by(r)) + received);
    t.busiest_rank_inter_bytes = std::max(t.busiest_rank_inter_bytes, inter_of[static_cast<std::size_t>(r)]);
  }
  t.balancedness = received_max > 0 ? received_sum / ranks / received_max : 1.0;
  return t;
}

}  // namespace

NodeLayout consecutive_nodes(int ranks, int ranks_per_node) {
  if (ranks_per_node <= 0) return {};
  std::vector<int> group(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) group[static_cast<std::size_t>(r)] = r / ranks_per_node;
  return NodeLayout::from_groups(group);
}

Result<Traffic> op_traffic(const TrafficShape& shape) {
  problem::ProblemShape s;
  s.ranks = shape.ranks;
  s.experts = shape.experts;
  s.top_k = shape.top_k;
  s.hidden = shape.hidden;
  s.max_tokens = shape.max_tokens;
  s.nodes = consecutive_nodes(shape.ranks, shape.ranks_per_node);
  s.dtype = shape.dtype;
  s.tokens_per_rank = shape.tokens;
  // The routing is the bench's (routing seed = seed, step 0); the payload seed does not change a byte count.
  EPS_ASSIGN_OR_RETURN(problem::Problem problem,
                       problem::Problem::make(s, shape.workload, 0, shape.seed, 0, shape.seed));
  const dispatch::DispatchPlan& plan = problem.plan();
  Traffic t;
  t.dispatch =
      summarize(bench::transport_bytes(plan, shape.per_selection, {.dispatch = true}), shape.ranks_per_node);
  t.combine =
      summarize(bench::transport_bytes(plan, shape.per_selection, {.combine = true}), shape.ranks_per_node);
  return t;
}

}  // namespace eps::model
