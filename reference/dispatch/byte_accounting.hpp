// Byte accounting of the reference (docs/dispatch.md 5.6), per rank, reported separately and never mixed:
// `algo` counts every row a rank receives (or sends), rows a rank sends to itself included (DeepEP / mori
// convention); `physical` here counts the same payload bytes where they cross a rank boundary (source rank !=
// destination rank). What a transport really puts on the wire (headers, signals, padding) only the transport
// knows: the bench reports that as `physical` (Transport::wire_bytes); this count is its lower bound.
//
// Units moved, and their size (payload and scales only):
// - HT dispatch: one row per (r, t, q) with q ∈ dst_ranks(r, t) (the rank-major rows, docs/dispatch.md
//   5.2), r -> q. Row bytes: 2H (bf16) or H + 4·H/128 (fp8 codes + fp32 scales). Routing metadata
//   (topk_idx, weights) is not counted, as in DeepEP's bandwidth figures.
// - HT combine: the same rows travelling back q -> r, 2H each (combine is bf16).
// - LL dispatch: one message per valid selection (r, t, k), r -> the rank its slot is placed on; no
//   per-rank deduplication (docs/dispatch.md 5.4). Message bytes: 2H (bf16) or H + 4·H/128 (fp8); the
//   per-message header a transport adds (DeepEP's 16-byte int4 with the source token) is not `algo`.
// - LL combine: the same selections travelling back, 2H each.
// `recv` is indexed by the receiving rank, `send` by the sending rank; Σ recv = Σ send for each op.
// docs/dispatch.md 5.6's "received rows × row bytes" is `recv`; DeepEP's tests quote combine bandwidth from
// the expert side, which is the combine `send` figure here.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/dispatch/dispatch_plan.hpp"

namespace eps::dispatch {

struct Traffic {
  std::int64_t algo = 0;
  std::int64_t physical = 0;
  friend bool operator==(const Traffic&, const Traffic&) = default;
};

struct RankTraffic {
  Traffic recv;
  Traffic send;
  friend bool operator==(const RankTraffic&, const RankTraffic&) = default;
};

struct ByteAccount {  // each vector is [R]
  std::vector<RankTraffic> ht_dispatch;
  std::vector<RankTraffic> ht_combine;
  std::vector<RankTraffic> ll_dispatch;
  std::vector<RankTraffic> ll_combine;
};

std::int64_t ht_dispatch_row_bytes(PayloadType dtype, int hidden);
std::int64_t ll_dispatch_message_bytes(PayloadType dtype, int hidden);
std::int64_t combine_row_bytes(int hidden);  // 2H

// O(Σ T_r · K) for all ranks at once.
ByteAccount account_bytes(const DispatchPlan& plan);

}  // namespace eps::dispatch
