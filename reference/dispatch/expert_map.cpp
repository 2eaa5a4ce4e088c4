#include "reference/dispatch/expert_map.hpp"

#include <numeric>
#include <string>

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

Result<ExpertMap> ExpertMap::make_replicated(int num_ranks, int num_experts, std::span<const int> phy2log,
                                             std::span<const std::vector<int>> log2phy) {
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
  EPS_RETURN_IF_ERROR(map.count_replicas());
  if (log2phy.empty()) {
    map.order_replicas_by_slot();
    return map;
  }
  EPS_RETURN_IF_ERROR(map.order_replicas_as(log2phy));
  return map;
}

Status ExpertMap::count_replicas() {
  replica_begin_.assign(static_cast<std::size_t>(num_experts_) + 1, 0);
  for (std::size_t p = 0; p < phy2log_.size(); ++p) {
    const int e = phy2log_[p];
    if (e < 0 || e >= num_experts_)
      return out_of_range(fmt::format("phy2log[{}]", p), 0, num_experts_ - 1, e);
    ++replica_begin_[static_cast<std::size_t>(e) + 1];
  }
  for (int e = 0; e < num_experts_; ++e) {
    if (replica_begin_[e + 1] == 0) {
      return invalid_argument(
          "phy2log", "expert {} has no replica; every expert needs at least one (docs/eplb.md 8.1)", e);
    }
    replica_begin_[e + 1] += replica_begin_[e];
  }
  return Status::ok_status();
}

void ExpertMap::order_replicas_by_slot() {
  // Counting sort by expert; scanning p upwards keeps each expert's replicas in ascending slot order.
  replica_slots_.resize(phy2log_.size());
  std::vector<int> next(replica_begin_.begin(), replica_begin_.end() - 1);
  for (std::size_t p = 0; p < phy2log_.size(); ++p) replica_slots_[next[phy2log_[p]]++] = static_cast<int>(p);
}

Status ExpertMap::order_replicas_as(std::span<const std::vector<int>> log2phy) {
  if (log2phy.size() != static_cast<std::size_t>(num_experts_)) {
    return invalid_argument("log2phy", "must have one row per expert ({}), got {}", num_experts_,
                            log2phy.size());
  }
  replica_slots_.clear();
  replica_slots_.reserve(phy2log_.size());
  std::vector<char> listed(phy2log_.size(), 0);
  for (int e = 0; e < num_experts_; ++e) EPS_RETURN_IF_ERROR(append_replica_row(e, log2phy[e], listed));
  return Status::ok_status();
}

// Row e of log2phy must be the inverse of phy2log (docs/eplb.md 8.1): cnt_e distinct slots holding e, then
// only -1 padding. cnt_e distinct slots that all hold e are exactly e's slots, so nothing else is checked.
Status ExpertMap::append_replica_row(int expert, const std::vector<int>& row, std::vector<char>& listed) {
  const auto count = static_cast<std::size_t>(replica_begin_[expert + 1] - replica_begin_[expert]);
  if (row.size() < count) {
    return invalid_argument(fmt::format("log2phy[{}]", expert),
                            "lists {} slots, but phy2log holds expert {} in {} slots", row.size(), expert,
                            count);
  }
  for (std::size_t j = 0; j < row.size(); ++j) {
    const std::string entry = fmt::format("log2phy[{}][{}]", expert, j);
    const int p = row[j];
    if (j >= count) {
      if (p == -1) continue;
      return invalid_argument(entry, "must be -1 (expert {} has {} replicas), got {}", expert, count, p);
    }
    if (p < 0 || p >= num_slots()) return out_of_range(entry, 0, num_slots() - 1, p);
    if (phy2log_[p] != expert) {
      return invalid_argument(entry, "slot {} holds expert {} in phy2log, not {} (docs/eplb.md 8.1)", p,
                              phy2log_[p], expert);
    }
    if (listed[p]) return invalid_argument(entry, "slot {} is listed twice", p);
    listed[p] = 1;
    replica_slots_.push_back(p);
  }
  return Status::ok_status();
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
