#include "reference/eplb/metrics.hpp"

#include <algorithm>
#include <cmath>

namespace eps::eplb {
namespace {

Status check_loads(const Placement& p, const LoadRows& load, std::string_view field) {
  if (load.size() != static_cast<std::size_t>(p.num_layers)) {
    return invalid_argument(field, "expected {} layers, got {}", p.num_layers, load.size());
  }
  for (std::size_t l = 0; l < load.size(); ++l) {
    if (load[l].size() != static_cast<std::size_t>(p.num_experts)) {
      return invalid_argument(fmt::format("{}[{}]", field, l), "expected {} expert loads, got {}",
                              p.num_experts, load[l].size());
    }
    for (std::size_t e = 0; e < load[l].size(); ++e) {
      if (!std::isfinite(load[l][e]) || load[l][e] < 0.0) {
        return invalid_argument(fmt::format("{}[{}][{}]", field, l, e),
                                "must be a finite number >= 0, got {}", load[l][e]);
      }
    }
  }
  return Status();
}

}  // namespace

Result<LoadRows> rank_loads(const Placement& placement, const LoadRows& load) {
  EPS_RETURN_IF_ERROR(check_loads(placement, load, "weight"));
  LoadRows result(placement.num_layers, std::vector<double>(placement.num_ranks, 0.0));
  for (int l = 0; l < placement.num_layers; ++l) {
    for (int slot = 0; slot < placement.num_slots; ++slot) {
      const int e = placement.slot_expert(l, slot);
      result[l][placement.rank_of_slot(slot)] += load[l][e] / placement.replica_count(l, e);
    }
  }
  return result;
}

Balancedness balancedness_of(const LoadRows& rank_load) {
  Balancedness b;
  double sum_mean = 0.0, sum_max = 0.0;
  for (const auto& row : rank_load) {
    double sum = 0.0, max = 0.0;
    for (double v : row) {
      sum += v;
      max = std::max(max, v);
    }
    const double mean = row.empty() ? 0.0 : sum / static_cast<double>(row.size());
    b.per_layer.push_back(max == 0.0 ? 1.0 : mean / max);
    sum_mean += mean;
    sum_max += max;
  }
  b.aggregate = sum_max == 0.0 ? 1.0 : sum_mean / sum_max;
  return b;
}

Result<Balancedness> balancedness(const Placement& placement, const LoadRows& load) {
  EPS_ASSIGN_OR_RETURN(LoadRows rank_load, rank_loads(placement, load));
  return balancedness_of(rank_load);
}

namespace {

// Per expert of `layer`: the ranks that hold a replica of it, ascending and once each. One pass over the
// slots, so that moved_experts is O(P log R) per layer rather than O(P x replicas) (fuzz_ref_eplb: 90000
// slots of 4 experts took minutes).
std::vector<std::vector<int>> ranks_holding(const Placement& placement, int layer) {
  std::vector<std::vector<int>> ranks(static_cast<std::size_t>(placement.num_experts));
  for (int slot = 0; slot < placement.num_slots; ++slot) {
    std::vector<int>& of_expert = ranks[static_cast<std::size_t>(placement.slot_expert(layer, slot))];
    const int rank = placement.rank_of_slot(slot);
    if (of_expert.empty() || of_expert.back() != rank) of_expert.push_back(rank);  // slots ascend by rank
  }
  return ranks;
}

}  // namespace

Result<MoveCounts> moved_experts(const Placement& from, const Placement& to, int ranks_per_node) {
  if (from.num_layers != to.num_layers || from.num_slots != to.num_slots ||
      from.num_experts != to.num_experts || from.num_ranks != to.num_ranks) {
    return invalid_argument("to",
                            "shape (layers {}, P {}, E {}, R {}) differs from the current placement "
                            "(layers {}, P {}, E {}, R {})",
                            to.num_layers, to.num_slots, to.num_experts, to.num_ranks, from.num_layers,
                            from.num_slots, from.num_experts, from.num_ranks);
  }
  if (ranks_per_node < 1 || from.num_ranks % ranks_per_node != 0) {
    return invalid_argument("ranks_per_node", "must be >= 1 and divide num_ranks = {}, got {}",
                            from.num_ranks, ranks_per_node);
  }
  MoveCounts counts;
  for (int l = 0; l < to.num_layers; ++l) {
    const std::vector<std::vector<int>> holders = ranks_holding(from, l);
    for (int slot = 0; slot < to.num_slots; ++slot) {
      const int e = to.slot_expert(l, slot);
      if (from.slot_expert(l, slot) == e) continue;
      const int rank = to.rank_of_slot(slot);
      const std::vector<int>& ranks = holders[static_cast<std::size_t>(e)];
      const int node_begin = rank / ranks_per_node * ranks_per_node;
      const auto first_on_node = std::lower_bound(ranks.begin(), ranks.end(), node_begin);
      const bool same_rank = std::binary_search(ranks.begin(), ranks.end(), rank);
      const bool same_node = first_on_node != ranks.end() && *first_on_node < node_begin + ranks_per_node;
      ++(same_rank ? counts.same_rank : same_node ? counts.same_node : counts.cross_node);
    }
  }
  return counts;
}

MoveBytes moved_bytes(const MoveCounts& counts, double bytes_per_expert) {
  return MoveBytes{static_cast<double>(counts.same_rank) * bytes_per_expert,
                   static_cast<double>(counts.same_node) * bytes_per_expert,
                   static_cast<double>(counts.cross_node) * bytes_per_expert};
}

Result<BalanceForecast> predicted_vs_realized(const Placement& placement, const LoadRows& planned,
                                              const LoadRows& next_window) {
  EPS_RETURN_IF_ERROR(check_loads(placement, next_window, "next_weight"));
  EPS_ASSIGN_OR_RETURN(Balancedness predicted, balancedness(placement, planned));
  EPS_ASSIGN_OR_RETURN(Balancedness realized, balancedness(placement, next_window));
  return BalanceForecast{std::move(predicted), std::move(realized)};
}

}  // namespace eps::eplb
