#include "reference/eplb/placement.hpp"

#include <algorithm>

namespace eps::eplb {
namespace {

Status violated(std::string_view invariant, std::string message) {
  return invalid_argument(fmt::format("placement: {}", invariant), "{}", message);
}

Status check_shape(const Placement& p) {
  if (p.num_layers < 1)
    return violated("shape", fmt::format("num_layers must be >= 1, got {}", p.num_layers));
  if (p.num_experts < 1)
    return violated("shape", fmt::format("num_experts must be >= 1, got {}", p.num_experts));
  if (p.num_ranks < 1) return violated("shape", fmt::format("num_ranks must be >= 1, got {}", p.num_ranks));
  if (p.num_slots < p.num_experts) {
    return violated(
        "shape", fmt::format("num_slots P = {} must be >= num_experts E = {}", p.num_slots, p.num_experts));
  }
  if (p.num_slots % p.num_ranks != 0) {
    return violated("ranks", fmt::format("num_slots P = {} is not a multiple of num_ranks R = {}, so ranks "
                                         "cannot hold P/R slots each",
                                         p.num_slots, p.num_ranks));
  }
  const auto layers = static_cast<std::size_t>(p.num_layers);
  const auto experts = static_cast<std::size_t>(p.num_experts);
  if (p.phy2log.size() != layers * p.num_slots) {
    return violated("shape", fmt::format("phy2log has {} entries, expected layers * P = {}", p.phy2log.size(),
                                         layers * p.num_slots));
  }
  if (p.logcnt.size() != layers * experts) {
    return violated("shape", fmt::format("logcnt has {} entries, expected layers * E = {}", p.logcnt.size(),
                                         layers * experts));
  }
  if (p.max_replicas < 1 || p.log2phy.size() != layers * experts * p.max_replicas) {
    return violated("shape", fmt::format("log2phy has {} entries, expected layers * E * X = {} (X = {})",
                                         p.log2phy.size(), layers * experts * std::max(p.max_replicas, 0),
                                         p.max_replicas));
  }
  return Status();
}

// Counts of every expert in one layer, or the first out-of-range slot.
Status count_layer(const Placement& p, int layer, std::vector<int>& counts) {
  counts.assign(p.num_experts, 0);
  for (int slot = 0; slot < p.num_slots; ++slot) {
    const int e = p.slot_expert(layer, slot);
    if (e < 0 || e >= p.num_experts) {
      return violated("range", fmt::format("phy2log[{}][{}] = {} is not an expert id in [0, {})", layer, slot,
                                           e, p.num_experts));
    }
    ++counts[e];
  }
  return Status();
}

Status check_counts(const Placement& p, int layer, const std::vector<int>& counts) {
  for (int e = 0; e < p.num_experts; ++e) {
    if (counts[e] == 0) {
      return violated("coverage", fmt::format("layer {}: expert {} has no replica", layer, e));
    }
    if (p.replica_count(layer, e) != counts[e]) {
      return violated("count", fmt::format("logcnt[{}][{}] = {} but {} slots hold expert {} (sum of logcnt "
                                           "must be P = {})",
                                           layer, e, p.replica_count(layer, e), counts[e], e, p.num_slots));
    }
    if (counts[e] > p.max_replicas) {
      return violated("shape", fmt::format("layer {}: expert {} has {} replicas, more than X = {}", layer, e,
                                           counts[e], p.max_replicas));
    }
  }
  return Status();
}

Status check_inverse(const Placement& p, int layer, std::vector<char>& seen) {
  seen.assign(p.num_slots, 0);
  for (int e = 0; e < p.num_experts; ++e) {
    for (int j = 0; j < p.max_replicas; ++j) {
      const int slot = p.replica_slot(layer, e, j);
      if (j >= p.replica_count(layer, e)) {
        if (slot != -1) {
          return violated("inverse",
                          fmt::format("log2phy[{}][{}][{}] = {}, expected -1 padding past logcnt = {}", layer,
                                      e, j, slot, p.replica_count(layer, e)));
        }
        continue;
      }
      if (slot < 0 || slot >= p.num_slots || p.slot_expert(layer, slot) != e || seen[slot]) {
        return violated(
            "inverse", fmt::format("log2phy[{}][{}][{}] = {} is not a distinct slot holding expert {}", layer,
                                   e, j, slot, e));
      }
      seen[slot] = 1;
    }
  }
  return Status();
}

}  // namespace

Status check_placement(const Placement& placement) {
  EPS_RETURN_IF_ERROR(check_shape(placement));
  std::vector<int> counts;
  std::vector<char> seen;
  for (int layer = 0; layer < placement.num_layers; ++layer) {
    EPS_RETURN_IF_ERROR(count_layer(placement, layer, counts));
    EPS_RETURN_IF_ERROR(check_counts(placement, layer, counts));
    EPS_RETURN_IF_ERROR(check_inverse(placement, layer, seen));
  }
  return Status();
}

Result<Placement> make_placement(std::span<const std::vector<int>> phy2log,
                                 std::span<const std::vector<int>> replica_index, int num_experts,
                                 int num_ranks) {
  if (phy2log.empty()) return invalid_argument("phy2log", "must have at least one layer");
  if (replica_index.size() != phy2log.size()) {
    return invalid_argument("replica_index", "expected {} layers, got {}", phy2log.size(),
                            replica_index.size());
  }
  Placement p;
  p.num_layers = static_cast<int>(phy2log.size());
  p.num_slots = static_cast<int>(phy2log[0].size());
  p.num_experts = num_experts;
  p.num_ranks = num_ranks;
  p.max_replicas = 1;
  for (std::size_t l = 0; l < phy2log.size(); ++l) {
    if (phy2log[l].size() != phy2log[0].size() || replica_index[l].size() != phy2log[0].size()) {
      return invalid_argument(fmt::format("phy2log[{}]", l), "expected {} slots, got {}", phy2log[0].size(),
                              phy2log[l].size());
    }
    for (int j : replica_index[l]) p.max_replicas = std::max(p.max_replicas, j + 1);
  }
  if (num_experts < 1) return out_of_range("num_experts", 1, 1 << 30, num_experts);
  p.phy2log.reserve(static_cast<std::size_t>(p.num_layers) * p.num_slots);
  for (const auto& row : phy2log) p.phy2log.insert(p.phy2log.end(), row.begin(), row.end());
  p.logcnt.assign(static_cast<std::size_t>(p.num_layers) * num_experts, 0);
  p.log2phy.assign(p.logcnt.size() * p.max_replicas, -1);
  for (int l = 0; l < p.num_layers; ++l) {
    for (int slot = 0; slot < p.num_slots; ++slot) {
      const int e = phy2log[l][slot];
      const int j = replica_index[l][slot];
      if (e < 0 || e >= num_experts) continue;  // reported as "range" by check_placement
      if (j < 0)
        return invalid_argument(fmt::format("replica_index[{}][{}]", l, slot), "must be >= 0, got {}", j);
      const std::size_t row = static_cast<std::size_t>(l) * num_experts + e;
      ++p.logcnt[row];
      std::int32_t& cell = p.log2phy[row * p.max_replicas + j];
      if (cell != -1) {
        return invalid_argument(fmt::format("replica_index[{}][{}]", l, slot),
                                "slots {} and {} are both replica {} of expert {}", cell, slot, j, e);
      }
      cell = slot;
    }
  }
  EPS_RETURN_IF_ERROR(check_placement(p));
  return p;
}

Result<Placement> placement_from_phy2log(std::span<const std::vector<int>> phy2log, int num_experts,
                                         int num_ranks) {
  std::vector<std::vector<int>> replica_index(phy2log.size());
  for (std::size_t l = 0; l < phy2log.size(); ++l) {
    std::vector<int> next(std::max(num_experts, 0), 0);
    replica_index[l].resize(phy2log[l].size());
    for (std::size_t slot = 0; slot < phy2log[l].size(); ++slot) {
      const int e = phy2log[l][slot];
      replica_index[l][slot] = (e >= 0 && e < num_experts) ? next[e]++ : 0;
    }
  }
  return make_placement(phy2log, replica_index, num_experts, num_ranks);
}

std::vector<std::vector<int>> phy2log_rows(const Placement& placement) {
  std::vector<std::vector<int>> rows(placement.num_layers);
  for (int l = 0; l < placement.num_layers; ++l) {
    const auto slots = placement.layer_slots(l);
    rows[l].assign(slots.begin(), slots.end());
  }
  return rows;
}

std::vector<std::vector<int>> replica_index_rows(const Placement& placement) {
  std::vector<std::vector<int>> rows(placement.num_layers, std::vector<int>(placement.num_slots, 0));
  for (int l = 0; l < placement.num_layers; ++l) {
    for (int e = 0; e < placement.num_experts; ++e) {
      for (int j = 0; j < placement.replica_count(l, e); ++j) rows[l][placement.replica_slot(l, e, j)] = j;
    }
  }
  return rows;
}

}  // namespace eps::eplb
