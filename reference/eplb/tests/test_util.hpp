// Helpers shared by the EPLB unit tests.
#pragma once

#include <random>
#include <vector>

#include "reference/eplb/placement.hpp"

namespace eps::eplb::testing {

inline std::vector<std::vector<double>> random_loads(std::mt19937& rng, int layers, int experts) {
  std::uniform_int_distribution<int> tokens(0, 999);
  std::bernoulli_distribution zero(0.1);
  std::vector<std::vector<double>> load(layers, std::vector<double>(experts));
  for (auto& row : load) {
    for (double& v : row) v = zero(rng) ? 0.0 : tokens(rng);
  }
  return load;
}

inline std::vector<std::vector<std::vector<double>>> random_traffic(std::mt19937& rng, int layers, int ranks,
                                                                    int experts) {
  std::vector<std::vector<std::vector<double>>> traffic(layers);
  for (auto& layer : traffic) layer = random_loads(rng, ranks, experts);
  return traffic;
}

// The largest even-split rank load of one layer, computed directly from phy2log (independent of
// metrics.cpp): each slot carries load[e] / (number of slots holding e).
inline double max_rank_load(const Placement& p, int layer, const std::vector<double>& load) {
  std::vector<int> count(p.num_experts, 0);
  for (int s = 0; s < p.num_slots; ++s) ++count[p.slot_expert(layer, s)];
  std::vector<double> rank(p.num_ranks, 0.0);
  for (int s = 0; s < p.num_slots; ++s) {
    const int e = p.slot_expert(layer, s);
    rank[s / (p.num_slots / p.num_ranks)] += load[e] / count[e];
  }
  double max = 0.0;
  for (double v : rank) max = v > max ? v : max;
  return max;
}

}  // namespace eps::eplb::testing
