// EPLB policies (docs/eplb.md 8.2, 8.3): loads -> placement, behind one interface, registered by name.
//
// Every policy reads an `EplbProblem` and returns an `EplbPlan` whose placement satisfies every
// docs/eplb.md 8.1 invariant (checked before it is returned). Loads are float64 token counts (any finite
// value >= 0); every tie follows the canonical order of docs/numerics.md 1.3 (value descending, then lowest
// id), so all-zero or all-equal loads give a well-defined placement. Validation errors name the `EplbProblem`
// field exactly as the JSON tool spells it ("num_replicas: ...", "weight[1][3]: ...").
//
// Registered policies (`eplb_policy_names()`), with their exact rules:
//
// deepseek (docs/eplb.md 8.2, deepseek-ai/EPLB): hierarchical when num_groups % num_nodes == 0, else the
// global
//   path, which is the same algorithm with num_groups = num_nodes = 1. Per layer:
//   1. group weight = sum of its E/G experts' loads (float64, ascending index); `balanced_packing` of the
//      G groups onto N nodes; group g becomes node-local group pack*(G/N) + rank_in_pack, its experts keep
//      their order, so node n owns "node-logical" experts [n*E/N, (n+1)*E/N).
//   2. per node, `replicate_experts` of its E/N experts onto P/N slots.
//   3. per node, `balanced_packing` of those P/N replicas (weight load_e / cnt_e) onto its R/N ranks;
//      replica i goes to slot node*P/N + pack*(P/R) + rank_in_pack.
//   `balanced_packing` sends item i to pack i when there is exactly one item per pack (e.g. G == N), as
//   the original does, instead of sorting. log2phy lists each expert's replicas in replication order
//   (replica 0 = the original copy), as the original's `phyrank`; X = the largest replica count of any layer.
//   Differences from the original: float64 instead of float32 loads, and canonical ties everywhere (the
//   original's torch sort is not guaranteed stable).
//   Requires E % G == 0 and R % N == 0 (and P % R == 0, P >= E as every policy).
//
// greedy: LPT without replication, P == E required: `lpt_packing` of the E experts onto R ranks of P/R
//   slots; expert e goes to slot pack*(P/R) + rank_in_pack.
//
// static: slot p holds expert p mod E (identity when P == E; the P - E extra slots hold replicas of
//   experts 0, 1, 2, ... round-robin). Loads are ignored; replicas are numbered in slot order.
//
// mindie-a2a, mindie-ag (docs/eplb.md 8.3, MindIE-SD DyEPLB "A2A"/"AG" services; random and argsort-order
// choices
//   replaced by lowest-id rules). Each rank has S = P/R slots and holds distinct experts (S <= E required).
//   Phase 1: experts in order of demand (descending, ties lowest e) each go to the rank with the fewest
//     used slots (ties lowest rank). Demand: a2a = sum_d traffic[l][d][e]; ag = load[l][e].
//   Phase 2 (a2a, locality): repeatedly take the (e, d) with e not on d and d not full that maximizes
//     gain = traffic[l][d][e] * (cost_remote - cost_local), over gain > 0; ties lowest e, then lowest d.
//   Phase 2 (ag, min-max): rank load = sum over its experts of load_e / cnt_e. Repeatedly take the (e, d)
//     (e not on d, d not full) whose replica most reduces the max rank load (d gains load_e/(cnt_e+1),
//     every holder of e drops from load_e/cnt_e to load_e/(cnt_e+1)); only strict reductions count;
//     ties lowest e, then lowest d.
//   Completion (both; the original may stop with empty slots, docs/eplb.md 8.1 needs every slot filled):
//   while a
//     rank has a free slot, the lowest such rank takes the expert it lacks with the largest demand_e /
//     cnt_e (ties lowest e).
//   Within a rank, slots are filled in the order experts were added; replicas are numbered in slot order.
//
// mindie-ex (docs/eplb.md 8.3, MindIE-SD "EX" expert exchange): starts from `current` (or the static
// placement
//   when absent) and keeps every slot's replica index. Slot weight w_s = load_e / cnt_e, rank load =
//   sum of its slot weights. For at most max_move rounds: hi = most loaded rank, lo = least loaded (ties
//   lowest rank); gap = load_hi - load_lo; stop when gap < threshold. Candidate swaps (a on hi, b on lo, by
//   local slot index) are ordered by |(w_a - w_b) - gap/2| ascending, ties by a*S + b ascending; the first
//   whose experts are not already on the other rank is taken if it strictly narrows the hi/lo gap, else the
//   policy stops. Each swap is one move (two experts change rank) and can never raise the max rank load.
//   The plan carries `slot_permutation` (new slot s holds the old slot perm[s]), i.e. the P x P matrix M
//   with M[perm[s]][s] = 1 used by all-gather EP as `scores · M`.
//
// Differences from MindIE-SD beyond the tie rules: loads are the global per-expert `weight` (the original
// AG uses the mean of the per-rank traffic rows and EX the traffic of each device to its own experts; both
// equal the global load, up to a constant factor, when every rank sees every token as in all-gather EP);
// EX halves the gap exactly (the original floor-divides) and its threshold defaults to 0 (the original
// hard-codes 100 tokens); A2A/AG get the completion step above; memory per expert is 1 slot.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/eplb/placement.hpp"

namespace eps::eplb {

struct EplbProblem {
  std::vector<std::vector<double>> weight;  // [layers][E] load of each logical expert (the JSON "weight")
  int num_replicas = 0;                     // P
  int num_groups = 1;                       // G (deepseek)
  int num_nodes = 1;                        // N; ranks per node = R / N
  int num_ranks = 0;                        // R
  // mindie-a2a: tokens from rank d to expert e, [layers][R][E] (required by a2a, ignored by the others).
  std::vector<std::vector<std::vector<double>>> traffic;
  std::optional<Placement> current;  // mindie-ex starting placement (static when absent)
  int max_move = 8;                  // mindie-ex: at most this many swaps per layer
  double threshold = 0.0;            // mindie-ex: stop when the hi/lo gap < threshold
  double cost_local = 1.0;           // mindie-a2a locality costs (MindIE-SD defaults)
  double cost_remote = 10.0;
};

struct EplbPlan {
  Placement placement;
  std::vector<std::vector<int>> slot_permutation;  // [layers][P], mindie-ex only (empty otherwise)
};

class EplbPolicy {
 public:
  virtual ~EplbPolicy() = default;
  virtual std::string_view name() const = 0;
  // Validates the problem (common rules of `validate_problem` plus the policy's own) and plans every layer.
  virtual Result<EplbPlan> plan(const EplbProblem& problem) const = 0;
};

// The registered policy called `name`, or an error listing the valid names (field "policy").
Result<const EplbPolicy*> find_eplb_policy(std::string_view name);
std::vector<std::string> eplb_policy_names();

// The rules every policy shares: weight is a non-empty [layers][E] matrix of finite values >= 0;
// R >= 1; P >= E; P % R == 0; G >= 1 with E % G == 0; N >= 1 with R % N == 0; traffic, when present, is
// [layers][R][E] of finite values >= 0; current, when present, is a valid placement of the same shape.
Status validate_problem(const EplbProblem& problem);

// The static placement (slot p holds expert p mod E) for `layers` layers.
Result<Placement> static_placement(int layers, int num_experts, int num_slots, int num_ranks);

}  // namespace eps::eplb
