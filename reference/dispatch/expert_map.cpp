#include "reference/dispatch/expert_map.hpp"

#include <numeric>

namespace eps::dispatch {
namespace {

Status check_sizes(int num_ranks, int num_experts) {
  if (num_ranks < 1 || num_ranks > kMaxRanks) return out_of_range("num_ranks", 1, kMaxRanks, num_ranks);
  if (num_experts < 1 || num_experts > kMaxExperts) {
    return out_of_range("num_experts", 1, kMaxExperts, num_experts);
  }
  return Status::ok_status();
}

}  // namespace

Result<ExpertMap> ExpertMap::make_default(int num_ranks, int num_experts) {
  EPS_RETURN_IF_ERROR(check_sizes(num_ranks, num_experts));
  if (num_experts % num_ranks != 0) {
    return invalid_argument("num_experts", "must be a multiple of num_ranks ({}), got {}", num_ranks,
                            num_experts);
  }
  std::vector<int> identity(static_cast<std::size_t>(num_experts));
  std::iota(identity.begin(), identity.end(), 0);
  EPS_ASSIGN_OR_RETURN(ExpertMap map, make_replicated(num_ranks, num_experts, identity));
  map.replicated_ = false;
  return map;
}

Result<ExpertMap> ExpertMap::make_replicated(int num_ranks, int num_experts, std::span<const int> phy2log) {
  EPS_RETURN_IF_ERROR(check_sizes(num_ranks, num_experts));
  if (phy2log.empty() || phy2log.size() % static_cast<std::size_t>(num_ranks) != 0 ||
      phy2log.size() > static_cast<std::size_t>(kMaxRanks) * kMaxExperts) {
    return invalid_argument("phy2log", "size must be a positive multiple of num_ranks ({}), got {}",
                            num_ranks, phy2log.size());
  }
  ExpertMap map;
  map.num_ranks_ = num_ranks;
  map.num_experts_ = num_experts;
  map.slots_per_rank_ = static_cast<int>(phy2log.size()) / num_ranks;
  map.replicated_ = true;
  map.phy2log_.assign(phy2log.begin(), phy2log.end());
  map.replica_begin_.assign(static_cast<std::size_t>(num_experts) + 1, 0);
  for (std::size_t p = 0; p < phy2log.size(); ++p) {
    const int e = phy2log[p];
    if (e < 0 || e >= num_experts) {
      return out_of_range(fmt::format("phy2log[{}]", p), 0, num_experts - 1, e);
    }
    ++map.replica_begin_[static_cast<std::size_t>(e) + 1];
  }
  for (int e = 0; e < num_experts; ++e) {
    if (map.replica_begin_[e + 1] == 0) {
      return invalid_argument(
          "phy2log", "expert {} has no replica; every expert needs at least one (docs/eplb.md 8.1)", e);
    }
    map.replica_begin_[e + 1] += map.replica_begin_[e];
  }
  // Counting sort by expert; scanning p upwards keeps each expert's replicas in ascending slot order.
  map.replica_slots_.resize(phy2log.size());
  std::vector<int> next(map.replica_begin_.begin(), map.replica_begin_.end() - 1);
  for (std::size_t p = 0; p < phy2log.size(); ++p)
    map.replica_slots_[next[phy2log[p]]++] = static_cast<int>(p);
  return map;
}

std::span<const int> ExpertMap::replicas(int expert) const {
  const int begin = replica_begin_[expert];
  return std::span<const int>(replica_slots_).subspan(begin, replica_begin_[expert + 1] - begin);
}

SlotPlacement ExpertMap::place(int expert, int token, int k, int top_k) const {
  const std::span<const int> slots = replicas(expert);
  // docs/eplb.md 8.4: flattened index t·K + k on the source rank, taken in 64 bits so large T·K cannot wrap.
  const auto flat = static_cast<long long>(token) * top_k + k;
  const int p = slots[static_cast<std::size_t>(flat % static_cast<long long>(slots.size()))];
  return SlotPlacement{p / slots_per_rank_, p % slots_per_rank_};
}

}  // namespace eps::dispatch
