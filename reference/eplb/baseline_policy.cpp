// greedy and static baselines (docs/eplb.md 8.3); the rules are written out in policy.hpp.
#include "reference/eplb/packing.hpp"
#include "reference/eplb/policies.hpp"

namespace eps::eplb {
namespace {

class GreedyPolicy final : public EplbPolicy {
 public:
  std::string_view name() const override { return "greedy"; }

  Result<EplbPlan> plan(const EplbProblem& problem) const override {
    EPS_RETURN_IF_ERROR(validate_problem(problem));
    const int experts = static_cast<int>(problem.weight[0].size());
    if (problem.num_replicas != experts) {
      return invalid_argument("num_replicas", "greedy does not replicate: must equal E = {}, got {}", experts,
                              problem.num_replicas);
    }
    const int slots_per_rank = problem.num_replicas / problem.num_ranks;
    std::vector<std::vector<int>> phy2log(problem.weight.size(), std::vector<int>(experts));
    for (std::size_t l = 0; l < problem.weight.size(); ++l) {
      const Packing packing = lpt_packing(problem.weight[l], problem.num_ranks);
      for (int e = 0; e < experts; ++e)
        phy2log[l][packing.pack[e] * slots_per_rank + packing.rank_in_pack[e]] = e;
    }
    EPS_ASSIGN_OR_RETURN(Placement placement, placement_from_phy2log(phy2log, experts, problem.num_ranks));
    return EplbPlan{std::move(placement), {}};
  }
};

class StaticPolicy final : public EplbPolicy {
 public:
  std::string_view name() const override { return "static"; }

  Result<EplbPlan> plan(const EplbProblem& problem) const override {
    EPS_RETURN_IF_ERROR(validate_problem(problem));
    EPS_ASSIGN_OR_RETURN(Placement placement, static_placement(static_cast<int>(problem.weight.size()),
                                                               static_cast<int>(problem.weight[0].size()),
                                                               problem.num_replicas, problem.num_ranks));
    return EplbPlan{std::move(placement), {}};
  }
};

}  // namespace

const EplbPolicy& greedy_policy() {
  static const GreedyPolicy kPolicy;
  return kPolicy;
}

const EplbPolicy& static_policy() {
  static const StaticPolicy kPolicy;
  return kPolicy;
}

}  // namespace eps::eplb
