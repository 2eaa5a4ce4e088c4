// `epsuite ref eplb`: one EPLB policy (docs/eplb.md 8) on a JSON document; the schema is in README.md.
// Input: policy, weight [layers][E], num_replicas, num_ranks, optional num_groups, num_nodes (default 1),
// max_move, threshold, cost_local, cost_remote, current (phy2log [layers][P], or {phy2log, replica_index}),
// traffic ([R][E] for every layer or [layers][R][E]) (read by impls/layer/planner/eplb_json.hpp, shared with
// the planner protocol), next_weight [layers][E], bytes_per_expert.
// Output: the placement (phy2log, log2phy, logcnt), its even-split rank_load and balancedness
// (docs/eplb.md 8.5), the moves from `current` (or from the static placement when absent) and, for mindie-ex,
// the slot permutation.
#include "harness/ref/ref_tool.hpp"
#include "impls/layer/planner/eplb_json.hpp"
#include "reference/eplb/metrics.hpp"
#include "reference/eplb/policy.hpp"

namespace eps {
namespace {

using eplb::EplbProblem;
using eplb::Placement;

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
  EPS_ASSIGN_OR_RETURN(auto next_weight, json_load_matrix(*next, "next_weight"));
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
  EPS_ASSIGN_OR_RETURN(EplbProblem problem, read_eplb_problem(in));
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
