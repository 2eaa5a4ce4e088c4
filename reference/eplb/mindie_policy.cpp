// mindie-a2a, mindie-ag and mindie-ex (docs/eplb.md 8.3, MindIE-SD DyEPLB); the rules are written out in
// policy.hpp. Every scan visits experts, then ranks, in ascending id and keeps only strict improvements,
// which is how the lowest-id tie rule replaces the original's random and argsort-order choices.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <utility>

#include "reference/eplb/policies.hpp"
#include "reference/numerics/canonical.hpp"

namespace eps::eplb {
namespace {

enum class Mode { kA2A, kAG };

// One layer's placement under construction: distinct experts per rank, filled in insertion order.
class RankSlots {
 public:
  RankSlots(int ranks, int experts, int slots_per_rank)
      : experts_(experts),
        slots_per_rank_(slots_per_rank),
        lists_(ranks),
        holds_(ranks * experts, 0),
        count_(experts, 0) {}

  int ranks() const { return static_cast<int>(lists_.size()); }
  bool holds(int d, int e) const { return holds_[d * experts_ + e] != 0; }
  bool full(int d) const { return static_cast<int>(lists_[d].size()) == slots_per_rank_; }
  int count(int e) const { return count_[e]; }
  const std::vector<int>& experts_on(int d) const { return lists_[d]; }
  std::size_t total() const { return total_; }  // slots filled so far

  void add(int d, int e) {
    lists_[d].push_back(e);
    holds_[d * experts_ + e] = 1;
    ++count_[e];
    ++total_;
  }

  std::vector<int> phy2log() const {
    std::vector<int> row;
    for (const auto& list : lists_) row.insert(row.end(), list.begin(), list.end());
    return row;
  }

 private:
  int experts_;
  int slots_per_rank_;
  std::size_t total_ = 0;
  std::vector<std::vector<int>> lists_;
  std::vector<char> holds_;
  std::vector<int> count_;
};

std::vector<double> layer_demand(const EplbProblem& p, std::size_t layer, Mode mode) {
  if (mode == Mode::kAG) return p.weight[layer];
  std::vector<double> demand(p.weight[layer].size(), 0.0);
  for (const auto& row : p.traffic[layer]) {
    for (std::size_t e = 0; e < row.size(); ++e) demand[e] += row[e];
  }
  return demand;
}

// Phase 1: every expert once, by demand, onto the rank with the fewest used slots.
void place_each_expert(RankSlots& slots, const std::vector<double>& demand) {
  std::vector<int> order(demand.size());
  canonical_sort<double>(demand, order);
  for (int e : order) {
    int best = 0;
    for (int d = 1; d < slots.ranks(); ++d) {
      if (slots.experts_on(d).size() < slots.experts_on(best).size()) best = d;
    }
    slots.add(best, e);
  }
}

// Adds the replica (expert e on rank d, e not there yet, d not full) of the largest positive gain(e, d),
// lowest e then lowest d on ties, until no replica gains anything. `gain` is called with the current slots.
template <typename Gain>
void add_replicas_while_gaining(RankSlots& slots, int experts, Gain gain) {
  while (true) {
    int best_e = -1, best_d = -1;
    double best_gain = 0.0;
    for (int e = 0; e < experts; ++e) {
      for (int d = 0; d < slots.ranks(); ++d) {
        if (slots.holds(d, e) || slots.full(d)) continue;
        const double g = gain(e, d);
        if (g > best_gain) {
          best_gain = g;
          best_e = e;
          best_d = d;
        }
      }
    }
    if (best_e < 0) return;
    slots.add(best_d, best_e);
  }
}

// Phase 2 (a2a): replicate where the most remote traffic becomes local.
void add_locality_replicas(RankSlots& slots, const std::vector<std::vector<double>>& traffic,
                           double cost_gap) {
  add_replicas_while_gaining(slots, static_cast<int>(traffic[0].size()),
                             [&](int e, int d) { return traffic[d][e] * cost_gap; });
}

std::vector<double> even_split_loads(const RankSlots& slots, const std::vector<double>& load) {
  std::vector<double> loads(slots.ranks(), 0.0);
  for (int d = 0; d < slots.ranks(); ++d) {
    for (int e : slots.experts_on(d)) loads[d] += load[e] / slots.count(e);
  }
  return loads;
}

// The max rank load after adding a replica of e on rank d.
double max_after_adding(const RankSlots& slots, const std::vector<double>& loads,
                        const std::vector<double>& load, int e, int d) {
  const double before = load[e] / slots.count(e);
  const double after = load[e] / (slots.count(e) + 1);
  double result = 0.0;
  for (int r = 0; r < slots.ranks(); ++r) {
    double v = loads[r];
    if (r == d) {
      v += after;
    } else if (slots.holds(r, e)) {
      v = v - before + after;
    }
    result = std::max(result, v);
  }
  return result;
}

// Phase 2 (ag): replicate while one replica strictly lowers the max rank load.
void add_min_max_replicas(RankSlots& slots, const std::vector<double>& load) {
  // The loads of the current slots, recomputed only when a replica was added (the gain sees new slots).
  std::vector<double> loads;
  std::size_t loads_of = 0;
  add_replicas_while_gaining(slots, static_cast<int>(load.size()), [&](int e, int d) {
    if (loads.empty() || loads_of != slots.total()) {
      loads = even_split_loads(slots, load);
      loads_of = slots.total();
    }
    const double max_load = *std::max_element(loads.begin(), loads.end());
    return max_load - max_after_adding(slots, loads, load, e, d);
  });
}

// Completion: every free slot takes the missing expert with the largest demand per replica.
void fill_free_slots(RankSlots& slots, const std::vector<double>& demand) {
  const int experts = static_cast<int>(demand.size());
  for (int d = 0; d < slots.ranks(); ++d) {
    while (!slots.full(d)) {
      int best = -1;
      double best_value = 0.0;
      for (int e = 0; e < experts; ++e) {
        if (slots.holds(d, e)) continue;
        const double value = demand[e] / slots.count(e);
        if (best < 0 || value > best_value) {
          best = e;
          best_value = value;
        }
      }
      slots.add(d, best);
    }
  }
}

class MindieReplicaPolicy final : public EplbPolicy {
 public:
  MindieReplicaPolicy(std::string_view name, Mode mode) : name_(name), mode_(mode) {}
  std::string_view name() const override { return name_; }

  Result<EplbPlan> plan(const EplbProblem& p) const override {
    EPS_RETURN_IF_ERROR(validate_problem(p));
    const int experts = static_cast<int>(p.weight[0].size());
    const int slots_per_rank = p.num_replicas / p.num_ranks;
    if (slots_per_rank > experts) {
      return invalid_argument("num_replicas",
                              "{} keeps experts distinct per rank: P/R = {} must be <= E = {}", name_,
                              slots_per_rank, experts);
    }
    if (mode_ == Mode::kA2A && p.traffic.empty()) {
      return invalid_argument("traffic", "required by {} ([layers][num_ranks][E] token counts)", name_);
    }
    if (mode_ == Mode::kA2A && p.cost_remote < p.cost_local) {
      return invalid_argument("cost_remote", "must be >= cost_local = {}, got {}", p.cost_local,
                              p.cost_remote);
    }
    std::vector<std::vector<int>> phy2log(p.weight.size());
    for (std::size_t l = 0; l < p.weight.size(); ++l) {
      RankSlots slots(p.num_ranks, experts, slots_per_rank);
      const std::vector<double> demand = layer_demand(p, l, mode_);
      place_each_expert(slots, demand);
      if (mode_ == Mode::kA2A) {
        add_locality_replicas(slots, p.traffic[l], p.cost_remote - p.cost_local);
      } else {
        add_min_max_replicas(slots, p.weight[l]);
      }
      fill_free_slots(slots, demand);
      phy2log[l] = slots.phy2log();
    }
    EPS_ASSIGN_OR_RETURN(Placement placement, placement_from_phy2log(phy2log, experts, p.num_ranks));
    return EplbPlan{std::move(placement), {}};
  }

 private:
  std::string_view name_;
  Mode mode_;
};

// One layer of mindie-ex: swaps between the most and least loaded ranks.
class ExchangeLayer {
 public:
  ExchangeLayer(const Placement& current, int layer, std::vector<int> replica,
                const std::vector<double>& load)
      : slots_per_rank_(current.slots_per_rank()), ranks_(current.num_ranks), replica_(std::move(replica)) {
    const auto row = current.layer_slots(layer);
    expert_.assign(row.begin(), row.end());
    permutation_.resize(expert_.size());
    std::iota(permutation_.begin(), permutation_.end(), 0);
    weight_.resize(expert_.size());
    for (std::size_t s = 0; s < expert_.size(); ++s)
      weight_[s] = load[expert_[s]] / current.replica_count(layer, expert_[s]);
    loads_.resize(ranks_);
    for (int r = 0; r < ranks_; ++r) loads_[r] = rank_load(r);
  }

  // One round; false when the policy stops.
  bool swap_once(double threshold) {
    const int hi = static_cast<int>(std::max_element(loads_.begin(), loads_.end()) - loads_.begin());
    const int lo = static_cast<int>(std::min_element(loads_.begin(), loads_.end()) - loads_.begin());
    const double gap = loads_[hi] - loads_[lo];
    if (hi == lo || gap < threshold || gap == 0.0) return false;
    const auto pair = first_admissible_pair(hi, lo, gap / 2);
    if (!pair) return false;
    const int a = hi * slots_per_rank_ + pair->first;
    const int b = lo * slots_per_rank_ + pair->second;
    const double moved = weight_[a] - weight_[b];
    if (!(std::fabs(gap - 2 * moved) < gap)) return false;
    std::swap(expert_[a], expert_[b]);
    std::swap(replica_[a], replica_[b]);
    std::swap(weight_[a], weight_[b]);
    std::swap(permutation_[a], permutation_[b]);
    loads_[hi] = rank_load(hi);
    loads_[lo] = rank_load(lo);
    return true;
  }

  const std::vector<int>& phy2log() const { return expert_; }
  const std::vector<int>& replica_index() const { return replica_; }
  const std::vector<int>& permutation() const { return permutation_; }

 private:
  double rank_load(int r) const {
    double sum = 0.0;
    for (int i = 0; i < slots_per_rank_; ++i) sum += weight_[r * slots_per_rank_ + i];
    return sum;
  }

  bool on_rank(int r, int e) const {
    for (int i = 0; i < slots_per_rank_; ++i) {
      if (expert_[r * slots_per_rank_ + i] == e) return true;
    }
    return false;
  }

  // Local slot pairs (a on hi, b on lo) by |(w_a - w_b) - half_gap|, then a*S + b; the first whose experts
  // are not already present on the other rank.
  std::optional<std::pair<int, int>> first_admissible_pair(int hi, int lo, double half_gap) const {
    const int s = slots_per_rank_;
    std::vector<std::pair<double, int>> candidates;
    candidates.reserve(static_cast<std::size_t>(s) * s);
    for (int a = 0; a < s; ++a) {
      for (int b = 0; b < s; ++b) {
        const double moved = weight_[hi * s + a] - weight_[lo * s + b];
        candidates.emplace_back(std::fabs(moved - half_gap), a * s + b);
      }
    }
    std::sort(candidates.begin(), candidates.end());
    for (const auto& [cost, flat] : candidates) {
      const int a = flat / s, b = flat % s;
      if (!on_rank(hi, expert_[lo * s + b]) && !on_rank(lo, expert_[hi * s + a])) return std::pair{a, b};
    }
    return std::nullopt;
  }

  int slots_per_rank_;
  int ranks_;
  std::vector<int> replica_;
  std::vector<int> expert_;
  std::vector<double> weight_;
  std::vector<int> permutation_;
  std::vector<double> loads_;
};

class MindieExchangePolicy final : public EplbPolicy {
 public:
  std::string_view name() const override { return "mindie-ex"; }

  Result<EplbPlan> plan(const EplbProblem& p) const override {
    EPS_RETURN_IF_ERROR(validate_problem(p));
    const int layers = static_cast<int>(p.weight.size());
    const int experts = static_cast<int>(p.weight[0].size());
    Placement start;
    if (p.current) {
      start = *p.current;
    } else {
      EPS_ASSIGN_OR_RETURN(start, static_placement(layers, experts, p.num_replicas, p.num_ranks));
    }
    std::vector<std::vector<int>> phy2log(layers), replica = replica_index_rows(start), permutation(layers);
    for (int l = 0; l < layers; ++l) {
      ExchangeLayer layer(start, l, std::move(replica[l]), p.weight[l]);
      int moves = 0;
      while (moves < p.max_move && layer.swap_once(p.threshold)) ++moves;
      phy2log[l] = layer.phy2log();
      replica[l] = layer.replica_index();
      permutation[l] = layer.permutation();
    }
    EPS_ASSIGN_OR_RETURN(Placement placement, make_placement(phy2log, replica, experts, p.num_ranks));
    return EplbPlan{std::move(placement), std::move(permutation)};
  }
};

}  // namespace

const EplbPolicy& mindie_a2a_policy() {
  static const MindieReplicaPolicy kPolicy("mindie-a2a", Mode::kA2A);
  return kPolicy;
}

const EplbPolicy& mindie_ag_policy() {
  static const MindieReplicaPolicy kPolicy("mindie-ag", Mode::kAG);
  return kPolicy;
}

const EplbPolicy& mindie_ex_policy() {
  static const MindieExchangePolicy kPolicy;
  return kPolicy;
}

}  // namespace eps::eplb
