#include "reference/eplb/replica_rule.hpp"

#include <limits>
#include <vector>

namespace eps::eplb {
namespace {

Status validate(const Placement& p, const Assignment& a, int ranks_per_node) {
  if (a.layer < 0 || a.layer >= p.num_layers) return out_of_range("layer", 0, p.num_layers - 1, a.layer);
  if (a.expert < 0 || a.expert >= p.num_experts)
    return out_of_range("expert", 0, p.num_experts - 1, a.expert);
  if (a.top_k < 1) return out_of_range("top_k", 1, std::numeric_limits<int>::max(), a.top_k);
  if (a.k < 0 || a.k >= a.top_k) return out_of_range("k", 0, a.top_k - 1, a.k);
  if (a.token < 0 || a.token > std::numeric_limits<std::int64_t>::max() / a.top_k - 1) {
    return out_of_range<std::int64_t>("token", 0, std::numeric_limits<std::int64_t>::max() / a.top_k - 1,
                                      a.token);
  }
  if (a.source_rank < 0 || a.source_rank >= p.num_ranks) {
    return out_of_range("source_rank", 0, p.num_ranks - 1, a.source_rank);
  }
  if (ranks_per_node < 1 || p.num_ranks % ranks_per_node != 0) {
    return invalid_argument("ranks_per_node", "must be >= 1 and divide num_ranks = {}, got {}", p.num_ranks,
                            ranks_per_node);
  }
  return Status();
}

// Replica slots of the assignment's expert whose rank satisfies `keep`, in replica order.
template <typename Keep>
std::vector<int> replicas_where(const Placement& p, const Assignment& a, Keep keep) {
  std::vector<int> slots;
  for (int j = 0; j < p.replica_count(a.layer, a.expert); ++j) {
    const int slot = p.replica_slot(a.layer, a.expert, j);
    if (keep(p.rank_of_slot(slot))) slots.push_back(slot);
  }
  return slots;
}

}  // namespace

Result<ReplicaRule> parse_replica_rule(std::string_view name) {
  if (name == "modulo") return ReplicaRule::kModulo;
  if (name == "local-first") return ReplicaRule::kLocalFirst;
  return invalid_argument("replica_rule", "must be one of {{modulo, local-first}}, got \"{}\"", name);
}

Result<int> replica_slot_for(const Placement& placement, const Assignment& a, ReplicaRule rule,
                             int ranks_per_node) {
  EPS_RETURN_IF_ERROR(validate(placement, a, ranks_per_node));
  const std::int64_t flat = a.token * a.top_k + a.k;
  if (rule == ReplicaRule::kLocalFirst) {
    const int node = a.source_rank / ranks_per_node;
    for (bool same_rank : {true, false}) {
      const std::vector<int> slots = replicas_where(placement, a, [&](int rank) {
        return same_rank ? rank == a.source_rank : rank / ranks_per_node == node;
      });
      if (!slots.empty()) return slots[flat % static_cast<std::int64_t>(slots.size())];
    }
  }
  const int replica = static_cast<int>(flat % placement.replica_count(a.layer, a.expert));
  return static_cast<int>(placement.replica_slot(a.layer, a.expert, replica));
}

}  // namespace eps::eplb
