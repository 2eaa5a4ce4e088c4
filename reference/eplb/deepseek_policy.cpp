// deepseek (docs/eplb.md 8.2); the rules are written out in policy.hpp.
#include "reference/eplb/packing.hpp"
#include "reference/eplb/policies.hpp"

namespace eps::eplb {
namespace {

struct Shape {
  int experts, slots, groups, nodes, ranks;
};

// "Node-logical" order of step 1: node n owns positions [n*E/N, (n+1)*E/N); returns position -> expert.
std::vector<int> pack_groups_to_nodes(std::span<const double> load, const Shape& s) {
  const int group_size = s.experts / s.groups;
  const int groups_per_node = s.groups / s.nodes;
  std::vector<double> group_weight(s.groups, 0.0);
  for (int g = 0; g < s.groups; ++g) {
    for (int j = 0; j < group_size; ++j) group_weight[g] += load[g * group_size + j];
  }
  const Packing packing = balanced_packing(group_weight, s.nodes);
  std::vector<int> position_expert(s.experts);
  for (int g = 0; g < s.groups; ++g) {
    const int first = (packing.pack[g] * groups_per_node + packing.rank_in_pack[g]) * group_size;
    for (int j = 0; j < group_size; ++j) position_expert[first + j] = g * group_size + j;
  }
  return position_expert;
}

// Steps 2 and 3 for one node: replicate its experts onto its slots, then pack the replicas onto its ranks.
void place_node(std::span<const double> load, std::span<const int> node_experts, int node, const Shape& s,
                std::vector<int>& slot_expert, std::vector<int>& slot_replica) {
  const int node_slots = s.slots / s.nodes;
  const int slots_per_rank = s.slots / s.ranks;
  std::vector<double> weight(node_experts.size());
  for (std::size_t m = 0; m < node_experts.size(); ++m) weight[m] = load[node_experts[m]];
  const Replication replication = replicate_experts(weight, node_slots);
  std::vector<double> replica_weight(node_slots);
  for (int i = 0; i < node_slots; ++i) {
    const int m = replication.slot_expert[i];
    replica_weight[i] = weight[m] / replication.count[m];
  }
  const Packing packing = balanced_packing(replica_weight, s.ranks / s.nodes);
  for (int i = 0; i < node_slots; ++i) {
    const int slot = node * node_slots + packing.pack[i] * slots_per_rank + packing.rank_in_pack[i];
    slot_expert[slot] = node_experts[replication.slot_expert[i]];
    slot_replica[slot] = replication.slot_replica[i];
  }
}

class DeepseekPolicy final : public EplbPolicy {
 public:
  std::string_view name() const override { return "deepseek"; }

  Result<EplbPlan> plan(const EplbProblem& problem) const override {
    EPS_RETURN_IF_ERROR(validate_problem(problem));
    Shape s{static_cast<int>(problem.weight[0].size()), problem.num_replicas, problem.num_groups,
            problem.num_nodes, problem.num_ranks};
    if (s.groups % s.nodes != 0) s.groups = s.nodes = 1;  // the global path
    const std::size_t layers = problem.weight.size();
    std::vector<std::vector<int>> phy2log(layers, std::vector<int>(s.slots));
    std::vector<std::vector<int>> replica(layers, std::vector<int>(s.slots));
    const int experts_per_node = s.experts / s.nodes;
    for (std::size_t l = 0; l < layers; ++l) {
      const std::vector<int> position_expert = pack_groups_to_nodes(problem.weight[l], s);
      for (int node = 0; node < s.nodes; ++node) {
        const std::span<const int> node_experts(position_expert.data() + node * experts_per_node,
                                                experts_per_node);
        place_node(problem.weight[l], node_experts, node, s, phy2log[l], replica[l]);
      }
    }
    EPS_ASSIGN_OR_RETURN(Placement placement, make_placement(phy2log, replica, s.experts, s.ranks));
    return EplbPlan{std::move(placement), {}};
  }
};

}  // namespace

const EplbPolicy& deepseek_policy() {
  static const DeepseekPolicy kPolicy;
  return kPolicy;
}

}  // namespace eps::eplb
