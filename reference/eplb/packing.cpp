#include "reference/eplb/packing.hpp"

#include <algorithm>
#include <numeric>

#include "reference/numerics/canonical.hpp"

namespace eps::eplb {

Packing lpt_packing(std::span<const double> weight, int num_packs) {
  const int n = static_cast<int>(weight.size());
  const int capacity = n / num_packs;
  std::vector<int> order(n);
  canonical_sort<double>(weight, order);
  Packing result{std::vector<int>(n, -1), std::vector<int>(n, -1)};
  std::vector<double> pack_weight(num_packs, 0.0);
  std::vector<int> pack_items(num_packs, 0);
  for (int item : order) {
    int best = -1;
    for (int p = 0; p < num_packs; ++p) {
      if (pack_items[p] == capacity) continue;
      if (best < 0 || pack_weight[p] < pack_weight[best]) best = p;  // strict: ties keep the lowest pack
    }
    result.pack[item] = best;
    result.rank_in_pack[item] = pack_items[best]++;
    pack_weight[best] += weight[item];
  }
  return result;
}

Packing balanced_packing(std::span<const double> weight, int num_packs) {
  const int n = static_cast<int>(weight.size());
  if (n != num_packs) return lpt_packing(weight, num_packs);
  Packing identity{std::vector<int>(n), std::vector<int>(n, 0)};
  std::iota(identity.pack.begin(), identity.pack.end(), 0);
  return identity;
}

Replication replicate_experts(std::span<const double> weight, int num_physical) {
  const int n = static_cast<int>(weight.size());
  Replication r{std::vector<int>(num_physical), std::vector<int>(num_physical, 0), std::vector<int>(n, 1)};
  std::iota(r.slot_expert.begin(), r.slot_expert.begin() + n, 0);
  // per_replica[e] == weight[e] / count[e] always; only the chosen expert's entry changes per slot.
  std::vector<double> per_replica(weight.begin(), weight.end());
  for (int slot = n; slot < num_physical; ++slot) {
    int best = 0;
    for (int e = 1; e < n; ++e) {
      if (per_replica[e] > per_replica[best]) best = e;
    }
    r.slot_expert[slot] = best;
    r.slot_replica[slot] = r.count[best]++;
    per_replica[best] = weight[best] / r.count[best];
  }
  return r;
}

}  // namespace eps::eplb
