// Replica dispatch rule (docs/eplb.md 8.4): which physical slot serves one (token, k) routing assignment.
//
// kModulo:     assignment (t, k) on the source rank to expert e with cnt_e replicas goes to replica
//              j = (t*K + k) mod cnt_e, i.e. slot log2phy[l][e][j]; t is the token index on the source rank
//              (t*K + k is the flattened assignment index there).
// kLocalFirst: the same flattened index n = t*K + k picks among the replicas of e on the source rank
//              (ordered by replica index): candidates[n mod |candidates|]; when there are none, among the
//              replicas on the source rank's node (ranks [node*RPN, (node+1)*RPN), RPN = ranks_per_node);
//              when there are none either, the kModulo rule.
// Replicas hold identical weights, so the choice never changes a token's result (docs/layer.md 4.2), only
// where it is computed.
#pragma once

#include <cstdint>
#include <string_view>

#include "reference/common/status.hpp"
#include "reference/eplb/placement.hpp"

namespace eps::eplb {

enum class ReplicaRule { kModulo, kLocalFirst };

// "modulo" or "local-first" (field "replica_rule").
Result<ReplicaRule> parse_replica_rule(std::string_view name);

struct Assignment {
  int layer = 0;
  int expert = 0;          // e in [0, E)
  std::int64_t token = 0;  // t >= 0, index on the source rank
  int k = 0;               // k in [0, top_k)
  int top_k = 1;           // K >= 1
  int source_rank = 0;     // in [0, R)
};

// The slot serving `a`; errors name the out-of-range field ("expert", "k", "ranks_per_node", ...).
Result<int> replica_slot_for(const Placement& placement, const Assignment& a, ReplicaRule rule,
                             int ranks_per_node);

}  // namespace eps::eplb
