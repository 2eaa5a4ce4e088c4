// `epsuite ref eplb`: one EPLB policy (docs/eplb.md 8) on a JSON document; the schema is in README.md.
// Input: policy, weight [layers][E], num_replicas, num_ranks, optional num_groups, num_nodes (default 1),
// max_move, threshold, cost_local, cost_remote, current (phy2log [layers][P]), traffic ([R][E] for every
// layer or [layers][R][E]), next_weight [layers][E], bytes_per_expert.
// Output: the placement (phy2log, log2phy, logcnt), its even-split rank_load and balancedness
// (docs/eplb.md 8.5), the moves from `current` (or from the static placement when absent) and, for mindie-ex,
// the slot permutation.
#include <cmath>
#include <limits>

#include "harness/ref/ref_tool.hpp"
#include "reference/eplb/metrics.hpp"
#include "reference/eplb/policy.hpp"

namespace eps {
namespace {

using eplb::EplbProblem;
using eplb::Placement;

constexpr std::int64_t kMaxCount = 1 << 24;

Result<std::vector<double>> double_row(const Json& row, const std::string& path) {
  if (!row.is_array()) return invalid_argument(path, "expected an array of numbers, got {}", row.type_name());
  std::vector<double> out;
  out.reserve(row.size());
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (!row[i].is_number()) {
      return invalid_argument(fmt::format("{}[{}]", path, i), "expected a number >= 0, got {}",
                              row[i].dump());
    }
    out.push_back(row[i].get<double>());
  }
  return out;
}

Result<std::vector<std::vector<double>>> double_matrix(const Json& value, const std::string& path) {
  if (!value.is_array())
    return invalid_argument(path, "expected an array of rows, got {}", value.type_name());
  std::vector<std::vector<double>> rows;
  for (std::size_t i = 0; i < value.size(); ++i) {
    EPS_ASSIGN_OR_RETURN(std::vector<double> row, double_row(value[i], fmt::format("{}[{}]", path, i)));
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<std::vector<std::vector<int>>> int_matrix(const Json& value, const std::string& path) {
  if (!value.is_array())
    return invalid_argument(path, "expected an array of rows, got {}", value.type_name());
  std::vector<std::vector<int>> rows(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    const Json& row = value[i];
    if (!row.is_array()) {
      return invalid_argument(fmt::format("{}[{}]", path, i), "expected an array of expert ids, got {}",
                              row.type_name());
    }
    for (std::size_t j = 0; j < row.size(); ++j) {
      if (!row[j].is_number_integer() || row[j].get<std::int64_t>() < 0 ||
          row[j].get<std::int64_t>() > kMaxCount) {
        return invalid_argument(fmt::format("{}[{}][{}]", path, i, j), "expected an expert id, got {}",
                                row[j].dump());
      }
      rows[i].push_back(row[j].get<int>());
    }
  }
  return rows;
}

// [R][E] (the same traffic for every layer) or [layers][R][E].
Result<std::vector<std::vector<std::vector<double>>>> traffic_of(const Json& value, std::size_t layers) {
  const bool per_layer = value.is_array() && !value.empty() && value[0].is_array() && !value[0].empty() &&
                         value[0][0].is_array();
  if (per_layer) {
    std::vector<std::vector<std::vector<double>>> traffic;
    for (std::size_t l = 0; l < value.size(); ++l) {
      EPS_ASSIGN_OR_RETURN(auto matrix, double_matrix(value[l], fmt::format("traffic[{}]", l)));
      traffic.push_back(std::move(matrix));
    }
    return traffic;
  }
  EPS_ASSIGN_OR_RETURN(auto matrix, double_matrix(value, "traffic"));
  return std::vector<std::vector<std::vector<double>>>(layers, matrix);
}

Status read_options(const JsonFields& in, EplbProblem& p) {
  EPS_ASSIGN_OR_RETURN(std::int64_t replicas, in.integer("num_replicas", 1, kMaxCount));
  EPS_ASSIGN_OR_RETURN(std::int64_t ranks, in.integer("num_ranks", 1, kMaxCount));
  EPS_ASSIGN_OR_RETURN(std::int64_t groups, in.integer("num_groups", 1, kMaxCount, 1));
  EPS_ASSIGN_OR_RETURN(std::int64_t nodes, in.integer("num_nodes", 1, kMaxCount, 1));
  EPS_ASSIGN_OR_RETURN(std::int64_t max_move, in.integer("max_move", 0, kMaxCount, p.max_move));
  EPS_ASSIGN_OR_RETURN(p.threshold,
                       in.number("threshold", 0.0, std::numeric_limits<double>::max(), p.threshold));
  EPS_ASSIGN_OR_RETURN(p.cost_local, in.number("cost_local", 0.0, 1e300, p.cost_local));
  EPS_ASSIGN_OR_RETURN(p.cost_remote, in.number("cost_remote", 0.0, 1e300, p.cost_remote));
  p.num_replicas = static_cast<int>(replicas);
  p.num_ranks = static_cast<int>(ranks);
  p.num_groups = static_cast<int>(groups);
  p.num_nodes = static_cast<int>(nodes);
  p.max_move = static_cast<int>(max_move);
  return Status();
}

Result<EplbProblem> read_problem(const JsonFields& in) {
  EplbProblem p;
  EPS_ASSIGN_OR_RETURN(const Json* weight, in.member("weight"));
  EPS_ASSIGN_OR_RETURN(p.weight, double_matrix(*weight, "weight"));
  EPS_RETURN_IF_ERROR(read_options(in, p));
  if (in.has("traffic")) {
    EPS_ASSIGN_OR_RETURN(const Json* traffic, in.member("traffic"));
    EPS_ASSIGN_OR_RETURN(p.traffic, traffic_of(*traffic, p.weight.size()));
  }
  if (in.has("current")) {
    EPS_ASSIGN_OR_RETURN(const Json* current, in.member("current"));
    EPS_ASSIGN_OR_RETURN(auto rows, int_matrix(*current, "current"));
    const int experts = p.weight.empty() ? 0 : static_cast<int>(p.weight[0].size());
    auto placement = eplb::placement_from_phy2log(rows, experts, p.num_ranks);
    if (!placement.ok()) return invalid_argument("current", "{}", placement.status().message());
    p.current = std::move(placement).value();
  }
  return p;
}

Json placement_json(const Placement& placement) {
  Json log2phy = Json::array();
  for (int l = 0; l < placement.num_layers; ++l) {
    Json layer = Json::array();
    for (int e = 0; e < placement.num_experts; ++e) {
      Json replicas = Json::array();
      for (int j = 0; j < placement.max_replicas; ++j) replicas.push_back(placement.replica_slot(l, e, j));
      layer.push_back(std::move(replicas));
    }
    log2phy.push_back(std::move(layer));
  }
  Json logcnt = Json::array();
  for (int l = 0; l < placement.num_layers; ++l) {
    Json row = Json::array();
    for (int e = 0; e < placement.num_experts; ++e) row.push_back(placement.replica_count(l, e));
    logcnt.push_back(std::move(row));
  }
  return Json{{"phy2log", eplb::phy2log_rows(placement)},
              {"log2phy", std::move(log2phy)},
              {"logcnt", std::move(logcnt)}};
}

Status add_moves(const EplbProblem& p, const Placement& placement, const JsonFields& in, Json& out) {
  Placement from;
  if (p.current) {
    from = *p.current;
  } else {
    EPS_ASSIGN_OR_RETURN(from, eplb::static_placement(placement.num_layers, placement.num_experts,
                                                      placement.num_slots, placement.num_ranks));
  }
  EPS_ASSIGN_OR_RETURN(eplb::MoveCounts moved,
                       eplb::moved_experts(from, placement, p.num_ranks / p.num_nodes));
  out["moved_experts"] = moved.total();
  out["moved"] = {
      {"same_rank", moved.same_rank}, {"same_node", moved.same_node}, {"cross_node", moved.cross_node}};
  if (in.has("bytes_per_expert")) {
    EPS_ASSIGN_OR_RETURN(double bytes, in.number("bytes_per_expert", 0.0, 1e300));
    const eplb::MoveBytes b = eplb::moved_bytes(moved, bytes);
    out["moved_bytes"] = {{"same_rank", b.same_rank},
                          {"same_node", b.same_node},
                          {"cross_node", b.cross_node},
                          {"total", b.total()}};
  }
  return Status();
}

Status add_realized(const EplbProblem& p, const Placement& placement, const JsonFields& in, Json& out) {
  if (!in.has("next_weight")) return Status();
  EPS_ASSIGN_OR_RETURN(const Json* next, in.member("next_weight"));
  EPS_ASSIGN_OR_RETURN(auto next_weight, double_matrix(*next, "next_weight"));
  EPS_ASSIGN_OR_RETURN(eplb::BalanceForecast forecast,
                       eplb::predicted_vs_realized(placement, p.weight, next_weight));
  out["balancedness_realized"] = forecast.realized.per_layer;
  out["balancedness_realized_aggregate"] = forecast.realized.aggregate;
  return Status();
}

}  // namespace

Result<Json> ref_eplb(const Json& input) {
  JsonFields in(input, "");
  EPS_RETURN_IF_ERROR(in.expect_object());
  EPS_ASSIGN_OR_RETURN(std::string policy_name, in.choice("policy", eplb::eplb_policy_names()));
  EPS_ASSIGN_OR_RETURN(EplbProblem problem, read_problem(in));
  EPS_ASSIGN_OR_RETURN(const eplb::EplbPolicy* policy, eplb::find_eplb_policy(policy_name));
  EPS_ASSIGN_OR_RETURN(eplb::EplbPlan plan, policy->plan(problem));
  Json out = placement_json(plan.placement);
  out["policy"] = policy_name;
  EPS_ASSIGN_OR_RETURN(eplb::LoadRows rank_load, eplb::rank_loads(plan.placement, problem.weight));
  const eplb::Balancedness beta = eplb::balancedness_of(rank_load);
  out["rank_load"] = rank_load;
  out["balancedness"] = beta.per_layer;
  out["balancedness_aggregate"] = beta.aggregate;
  out["imbalance_aggregate"] = eplb::imbalance(beta.aggregate);
  EPS_RETURN_IF_ERROR(add_moves(problem, plan.placement, in, out));
  EPS_RETURN_IF_ERROR(add_realized(problem, plan.placement, in, out));
  if (!plan.slot_permutation.empty()) out["slot_permutation"] = plan.slot_permutation;
  return out;
}

}  // namespace eps
