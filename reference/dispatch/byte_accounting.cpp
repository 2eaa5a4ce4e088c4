#include "reference/dispatch/byte_accounting.hpp"

namespace eps::dispatch {
namespace {

// One unit of `bytes` moving src -> dst.
void move(std::vector<RankTraffic>& op, int src, int dst, std::int64_t bytes) {
  op[dst].recv.algo += bytes;
  op[src].send.algo += bytes;
  if (src == dst) return;
  op[dst].recv.physical += bytes;
  op[src].send.physical += bytes;
}

}  // namespace

std::int64_t ht_dispatch_row_bytes(PayloadType dtype, int hidden) {
  return static_cast<std::int64_t>(payload_row_bytes(dtype, hidden)) + 4 * payload_num_scales(dtype, hidden);
}

std::int64_t ll_dispatch_message_bytes(PayloadType dtype, int hidden) {
  return ht_dispatch_row_bytes(dtype, hidden);
}

std::int64_t combine_row_bytes(int hidden) { return 2 * static_cast<std::int64_t>(hidden); }

ByteAccount account_bytes(const DispatchPlan& plan) {
  const auto num_ranks = static_cast<std::size_t>(plan.num_ranks());
  ByteAccount account{std::vector<RankTraffic>(num_ranks), std::vector<RankTraffic>(num_ranks),
                      std::vector<RankTraffic>(num_ranks), std::vector<RankTraffic>(num_ranks)};
  const PayloadType dtype = plan.config().dtype;
  const std::int64_t ht_row = ht_dispatch_row_bytes(dtype, plan.hidden());
  const std::int64_t ll_message = ll_dispatch_message_bytes(dtype, plan.hidden());
  const std::int64_t combine_row = combine_row_bytes(plan.hidden());
  for (int r = 0; r < plan.num_ranks(); ++r) {
    for (int t = 0; t < plan.num_tokens(r); ++t) {
      for (int q : plan.dst_ranks(r, t)) {
        move(account.ht_dispatch, r, q, ht_row);
        move(account.ht_combine, q, r, combine_row);
      }
      for (int k = 0; k < plan.top_k(); ++k) {
        const SlotPlacement p = plan.placement(r, t, k);
        if (p.rank < 0) continue;
        move(account.ll_dispatch, r, p.rank, ll_message);
        move(account.ll_combine, p.rank, r, combine_row);
      }
    }
  }
  return account;
}

}  // namespace eps::dispatch
