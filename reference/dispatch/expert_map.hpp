// Expert placement for dispatch (docs/dispatch.md 5, docs/eplb.md 8.1, docs/eplb.md 8.4): where the expert of
// one top-k slot lives.
//
// An ExpertMap is a list of P physical slots spread evenly over R ranks: slot p lives on rank
// `p / (P/R)` with local slot index `p % (P/R)` and holds logical expert `phy2log[p]`.
//
// - Default placement (`make_default`): P = E and phy2log is the identity, so expert e lives on rank
//   `e / L` with local index `e % L`, L = E/R (docs/README.md vocabulary). E must be a multiple of R.
// - EPLB placement (`make_replicated`): phy2log of ONE layer, [P] with P a multiple of R; every expert
//   needs at least one replica (docs/eplb.md 8.1). E need not be a multiple of R. Replica j of expert e is
//   `log2phy[e][j]` (docs/eplb.md 8.4), so the replica order is log2phy's when it is given: the `deepseek`
//   policy lists replicas in replication order, not by slot id (docs/eplb.md 8.2). Without log2phy the
//   replicas are numbered by ascending slot id, which equals log2phy for the policies that number replicas
//   in slot order (reference/eplb/policy.hpp). A (token t, slot k) assignment on its source rank goes to
//   replica `(t·K + k) mod cnt_e` (docs/eplb.md 8.4, the flattened index on the source rank). The
//   `local-first` variant of docs/eplb.md 8.4 is not modelled here.
//
// Throughout reference/dispatch a *local expert index* is the local slot index on the destination rank
// (so under an EPLB placement it ranges over P/R slots, not over logical experts), and a *global slot*
// is `rank · slots_per_rank + local`, which equals the expert id e for the default placement and the
// physical slot id p for an EPLB placement.
//
// The map is constructed from plain vectors; it does not depend on reference/eplb.
#pragma once

#include <span>
#include <vector>

#include "reference/common/status.hpp"

namespace eps::dispatch {

inline constexpr int kMaxRanks = 1024;  // with kMaxTokensPerRank, R · T_max stays below 2^31
inline constexpr int kMaxExperts = 1 << 16;

// Destination of one valid top-k slot. `rank == -1` (and `local == -1`) for a masked slot.
struct SlotPlacement {
  int rank = -1;
  int local = -1;
  friend bool operator==(const SlotPlacement&, const SlotPlacement&) = default;
};

class ExpertMap {
 public:
  // Expert e on rank e / L, local e % L. Errors: num_ranks outside [1, kMaxRanks], num_experts outside
  // [1, kMaxExperts], num_experts not a multiple of num_ranks.
  static Result<ExpertMap> make_default(int num_ranks, int num_experts);

  // EPLB placement of one layer. `log2phy`, when not empty, is [E] rows of expert e's slots in replica
  // order, each optionally padded with -1 (docs/eplb.md 8.1); when empty, replicas go by ascending slot id.
  // Errors: num_ranks / num_experts out of range, phy2log empty or its size not a multiple of num_ranks, an
  // entry outside [0, num_experts), an expert without a replica; log2phy without one row per expert, or a
  // row that is not the inverse of phy2log (its first cnt_e entries distinct slots holding e, then only -1).
  static Result<ExpertMap> make_replicated(int num_ranks, int num_experts, std::span<const int> phy2log,
                                           std::span<const std::vector<int>> log2phy = {});

  int num_ranks() const { return num_ranks_; }
  int num_experts() const { return num_experts_; }
  int slots_per_rank() const { return slots_per_rank_; }               // L (default) or P/R (EPLB)
  int num_slots() const { return static_cast<int>(phy2log_.size()); }  // P (E for the default)
  bool replicated() const { return replicated_; }

  // Logical expert held by global slot p, p in [0, num_slots()).
  int logical_expert(int slot) const { return phy2log_[slot]; }
  // Physical slot ids of expert e's replicas in replica order (replica j at [j]). Precondition: e in
  // [0, num_experts()).
  std::span<const int> replicas(int expert) const;

  // Destination of slot k of token t (on its source rank) whose expert is `expert`; `top_k` is K.
  // Preconditions: expert in [0, num_experts()), token >= 0, k in [0, top_k).
  SlotPlacement place(int expert, int token, int k, int top_k) const;

 private:
  ExpertMap() = default;
  // Steps of make_replicated: replica_begin_ from phy2log_, then replica_slots_ in one of the two orders.
  Status count_replicas();
  void order_replicas_by_slot();
  Status order_replicas_as(std::span<const std::vector<int>> log2phy);
  Status append_replica_row(int expert, const std::vector<int>& row, std::vector<char>& listed);

  int num_ranks_ = 0;
  int num_experts_ = 0;
  int slots_per_rank_ = 0;
  bool replicated_ = false;
  std::vector<int> phy2log_;        // [P]
  std::vector<int> replica_begin_;  // [E + 1] offsets into replica_slots_
  std::vector<int> replica_slots_;  // [P] physical slots grouped by expert, in replica order within an expert
};

}  // namespace eps::dispatch
