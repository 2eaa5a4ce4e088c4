// An expert placement (docs/eplb.md 8.1): which logical expert each physical slot holds, per MoE layer.
//
// Shapes and meaning, for `layers` layers, E logical experts, P physical slots and R ranks:
//   phy2log [layers, P]     the logical expert held by slot p; slot p lives on rank p / (P/R).
//   log2phy [layers, E, X]  the slots of expert e in replica order (replica j at [l][e][j]), -1 padded;
//                           X = max_replicas = the largest replica count over all layers (as
//                           deepseek-ai/EPLB).
//   logcnt  [layers, E]     the number of replicas of expert e.
// Storage is flat and row-major; the accessors below index it. The fields are public so that a caller
// (or a test) can build any placement; `check_placement` says whether it is valid.
//
// Invariants (docs/eplb.md 8.1), each checked by `check_placement` with a message naming it:
//   "shape"        every array has the size its dimensions say; E >= 1, R >= 1, P % R == 0, P >= E;
//   "range"        every phy2log entry is an expert id in [0, E);
//   "coverage"     every expert has at least one replica (logcnt >= 1);
//   "count"        logcnt[l][e] equals the number of slots holding e, so sum_e logcnt[l][e] = P;
//   "ranks"        each rank holds exactly P/R slots (true by construction once P % R == 0);
//   "inverse"      log2phy is the inverse of phy2log: its first logcnt entries are distinct slots that
//                  hold e, the remaining X - logcnt entries are -1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "reference/common/status.hpp"

namespace eps::eplb {

struct Placement {
  int num_layers = 0;
  int num_slots = 0;                  // P
  int num_experts = 0;                // E
  int num_ranks = 0;                  // R
  int max_replicas = 0;               // X
  std::vector<std::int32_t> phy2log;  // [num_layers * num_slots]
  std::vector<std::int32_t> log2phy;  // [num_layers * num_experts * max_replicas]
  std::vector<std::int32_t> logcnt;   // [num_layers * num_experts]

  int slots_per_rank() const { return num_slots / num_ranks; }
  int rank_of_slot(int slot) const { return slot / slots_per_rank(); }

  std::int32_t slot_expert(int layer, int slot) const {
    return phy2log[static_cast<std::size_t>(layer) * num_slots + slot];
  }
  std::int32_t replica_count(int layer, int expert) const {
    return logcnt[static_cast<std::size_t>(layer) * num_experts + expert];
  }
  std::int32_t replica_slot(int layer, int expert, int replica) const {
    return log2phy[(static_cast<std::size_t>(layer) * num_experts + expert) * max_replicas + replica];
  }
  std::span<const std::int32_t> layer_slots(int layer) const {
    return {phy2log.data() + static_cast<std::size_t>(layer) * num_slots,
            static_cast<std::size_t>(num_slots)};
  }
};

// Builds a placement from phy2log rows [layers][P] and the replica index of each slot ([layers][P]:
// slot p is replica replica_index[l][p] of expert phy2log[l][p]); fills log2phy and logcnt and then runs
// `check_placement`, so a bad input (duplicate replica index, gap, expert out of range) is an error.
Result<Placement> make_placement(std::span<const std::vector<int>> phy2log,
                                 std::span<const std::vector<int>> replica_index, int num_experts,
                                 int num_ranks);

// As above, with replicas numbered in ascending slot order (replica 0 is the expert's lowest slot).
Result<Placement> placement_from_phy2log(std::span<const std::vector<int>> phy2log, int num_experts,
                                         int num_ranks);

// Verifies every docs/eplb.md 8.1 invariant; the error message starts with "placement: <invariant>" (see
// above) and names the layer, expert or slot at fault.
Status check_placement(const Placement& placement);

// phy2log as [layers][P] rows, and the replica index of every slot (its position in log2phy).
std::vector<std::vector<int>> phy2log_rows(const Placement& placement);
std::vector<std::vector<int>> replica_index_rows(const Placement& placement);

}  // namespace eps::eplb
