#include "reference/eplb/policy.hpp"

#include <array>
#include <cmath>
#include <functional>

#include <fmt/ranges.h>

#include "reference/eplb/policies.hpp"

namespace eps::eplb {
namespace {

constexpr int kMaxCount = 1 << 24;

using PolicyRef = std::reference_wrapper<const EplbPolicy>;

// One line per policy; adding a policy touches only this table.
std::span<const PolicyRef> registry() {
  static const std::array<PolicyRef, 6> kPolicies = {
      std::cref(deepseek_policy()),   std::cref(greedy_policy()),    std::cref(static_policy()),
      std::cref(mindie_a2a_policy()), std::cref(mindie_ag_policy()), std::cref(mindie_ex_policy())};
  return kPolicies;
}

bool valid_value(double v) { return std::isfinite(v) && v >= 0.0; }

// The error names the field only when there is one: formatting a name per element would dominate planning.
template <typename... Index>
Status check_value(double v, std::string_view field, Index... index) {
  if (valid_value(v)) return Status();
  std::string name(field);
  ((name += fmt::format("[{}]", index)), ...);
  return invalid_argument(name, "must be a finite number >= 0, got {}", v);
}

Status validate_weight(const EplbProblem& p) {
  if (p.weight.empty()) return invalid_argument("weight", "must have at least one layer, got 0");
  const std::size_t experts = p.weight[0].size();
  if (experts < 1 || experts > kMaxCount) {
    return invalid_argument("weight[0]", "must have between 1 and {} expert loads, got {}", kMaxCount,
                            experts);
  }
  for (std::size_t l = 0; l < p.weight.size(); ++l) {
    if (p.weight[l].size() != experts) {
      return invalid_argument(fmt::format("weight[{}]", l), "expected {} expert loads (as weight[0]), got {}",
                              experts, p.weight[l].size());
    }
    for (std::size_t e = 0; e < experts; ++e) {
      EPS_RETURN_IF_ERROR(check_value(p.weight[l][e], "weight", l, e));
    }
  }
  return Status();
}

Status validate_sizes(const EplbProblem& p) {
  const int experts = static_cast<int>(p.weight[0].size());
  if (p.num_ranks < 1 || p.num_ranks > kMaxCount) return out_of_range("num_ranks", 1, kMaxCount, p.num_ranks);
  if (p.num_replicas < experts || p.num_replicas > kMaxCount) {
    return out_of_range("num_replicas", experts, kMaxCount, p.num_replicas);
  }
  if (p.num_replicas % p.num_ranks != 0) {
    return invalid_argument("num_replicas", "must be a multiple of num_ranks = {}, got {}", p.num_ranks,
                            p.num_replicas);
  }
  if (p.num_groups < 1 || p.num_groups > experts) return out_of_range("num_groups", 1, experts, p.num_groups);
  if (experts % p.num_groups != 0) {
    return invalid_argument("num_groups", "must divide the number of experts E = {}, got {}", experts,
                            p.num_groups);
  }
  if (p.num_nodes < 1 || p.num_nodes > p.num_ranks)
    return out_of_range("num_nodes", 1, p.num_ranks, p.num_nodes);
  if (p.num_ranks % p.num_nodes != 0) {
    return invalid_argument("num_nodes", "must divide num_ranks = {}, got {}", p.num_ranks, p.num_nodes);
  }
  return Status();
}

Status validate_traffic(const EplbProblem& p) {
  if (p.traffic.empty()) return Status();
  const std::size_t experts = p.weight[0].size();
  if (p.traffic.size() != p.weight.size()) {
    return invalid_argument("traffic", "expected {} layers (as weight), got {}", p.weight.size(),
                            p.traffic.size());
  }
  for (std::size_t l = 0; l < p.traffic.size(); ++l) {
    if (p.traffic[l].size() != static_cast<std::size_t>(p.num_ranks)) {
      return invalid_argument(fmt::format("traffic[{}]", l), "expected num_ranks = {} rows, got {}",
                              p.num_ranks, p.traffic[l].size());
    }
    for (std::size_t d = 0; d < p.traffic[l].size(); ++d) {
      const auto& row = p.traffic[l][d];
      if (row.size() != experts) {
        return invalid_argument(fmt::format("traffic[{}][{}]", l, d), "expected {} expert counts, got {}",
                                experts, row.size());
      }
      for (std::size_t e = 0; e < experts; ++e) {
        EPS_RETURN_IF_ERROR(check_value(row[e], "traffic", l, d, e));
      }
    }
  }
  return Status();
}

Status validate_current(const EplbProblem& p) {
  if (!p.current) return Status();
  const Placement& c = *p.current;
  if (c.num_layers != static_cast<int>(p.weight.size()) ||
      c.num_experts != static_cast<int>(p.weight[0].size()) || c.num_slots != p.num_replicas ||
      c.num_ranks != p.num_ranks) {
    return invalid_argument(
        "current",
        "expected a placement of {} layers, E = {}, P = {}, R = {}; got {} layers, E = {}, "
        "P = {}, R = {}",
        p.weight.size(), p.weight[0].size(), p.num_replicas, p.num_ranks, c.num_layers, c.num_experts,
        c.num_slots, c.num_ranks);
  }
  const Status valid = check_placement(c);
  if (!valid.ok()) return invalid_argument("current", "{}", valid.message());
  return Status();
}

}  // namespace

Status validate_problem(const EplbProblem& problem) {
  EPS_RETURN_IF_ERROR(validate_weight(problem));
  EPS_RETURN_IF_ERROR(validate_sizes(problem));
  EPS_RETURN_IF_ERROR(validate_traffic(problem));
  EPS_RETURN_IF_ERROR(validate_current(problem));
  if (problem.max_move < 0) return out_of_range("max_move", 0, kMaxCount, problem.max_move);
  if (!std::isfinite(problem.threshold) || problem.threshold < 0.0) {
    return invalid_argument("threshold", "must be a finite number >= 0, got {}", problem.threshold);
  }
  EPS_RETURN_IF_ERROR(check_value(problem.cost_local, "cost_local"));
  EPS_RETURN_IF_ERROR(check_value(problem.cost_remote, "cost_remote"));
  return Status();
}

Result<const EplbPolicy*> find_eplb_policy(std::string_view name) {
  for (const EplbPolicy& policy : registry()) {
    if (policy.name() == name) return &policy;
  }
  return invalid_argument("policy", "must be one of {{{}}}, got \"{}\"", fmt::join(eplb_policy_names(), ", "),
                          name);
}

std::vector<std::string> eplb_policy_names() {
  std::vector<std::string> names;
  for (const EplbPolicy& policy : registry()) names.emplace_back(policy.name());
  return names;
}

Result<Placement> static_placement(int layers, int num_experts, int num_slots, int num_ranks) {
  if (num_experts < 1) return out_of_range("num_experts", 1, kMaxCount, num_experts);
  std::vector<std::vector<int>> rows(std::max(layers, 0), std::vector<int>(std::max(num_slots, 0)));
  for (auto& row : rows) {
    for (int p = 0; p < num_slots; ++p) row[p] = p % num_experts;
  }
  return placement_from_phy2log(rows, num_experts, num_ranks);
}

}  // namespace eps::eplb
