// The building blocks of the deepseek policy (docs/eplb.md 8.2), exposed so that each can be tested on its
// own. All weights are float64 and must be finite and >= 0 (callers validate); all ties follow the canonical
// order of docs/numerics.md 1.3 (weight descending, then index ascending).
#pragma once

#include <span>
#include <vector>

namespace eps::eplb {

// pack[i] is the pack of item i, rank_in_pack[i] its position inside the pack (0 = placed first).
struct Packing {
  std::vector<int> pack;
  std::vector<int> rank_in_pack;
};

// Capacity-constrained LPT: n items into num_packs packs of exactly n / num_packs items each
// (n % num_packs == 0). Items are visited by weight descending, then index ascending; each goes to the
// non-full pack with the least accumulated weight (float64 sums in visiting order), ties to the lowest
// pack index; its rank_in_pack is the number of items the pack held before it.
Packing lpt_packing(std::span<const double> weight, int num_packs);

// deepseek-ai/EPLB `balanced_packing`: `lpt_packing`, except that with exactly one item per pack item i
// goes to pack i (the original's shortcut, kept so that placements match it slot for slot).
Packing balanced_packing(std::span<const double> weight, int num_packs);

// deepseek-ai/EPLB `replicate_experts` for one row: num_physical >= n slots; slot i < n holds expert i
// (replica 0); each further slot takes the expert with the largest weight[e] / count[e] (float64 division,
// ties to the lowest e) and becomes replica count[e] of it, after which count[e] grows by one.
struct Replication {
  std::vector<int> slot_expert;   // [num_physical]
  std::vector<int> slot_replica;  // [num_physical]
  std::vector<int> count;         // [n]
};
Replication replicate_experts(std::span<const double> weight, int num_physical);

}  // namespace eps::eplb
