// Open receive order (SPEC 14.3, docs/dispatch.md 5.9): the checks of the HT layouts for a transport that
// declares that rows may arrive in any order inside a block, as DeepEP V2's expert-major layout and every
// implementation that places rows with atomics do. (LL's open order is LlOrder::kUnordered, ll_dispatch.hpp.)
//
// A block is compared as a multiset of rows: every received row must equal, bit for bit, one expected row of
// its block that no other received row matched, where a row is all of its arrays together (payload, fp8
// scales and the row's metadata), so a row whose payload arrived with another row's weight or local expert
// index is caught. The invariants that do not depend on order are compared exactly:
// - rank-major (5.2): block r = the rows of source rank r, at the rows the rank prefix matrix gives it;
//   num_recv_tokens_per_expert exactly; a row = recv_x, recv_x_scales (fp8), recv_topk_idx and
//   recv_topk_weights.
// - expert-major (5.3): block l = the valid rows of local expert l's segment, which starts where the aligned
//   counts put it; its padding rows follow the valid rows and are compared exactly (zero bytes, zero scales,
//   weight +0.0f); a row = recv_x, recv_x_scales (fp8) and recv_weights. The segment lengths
//   (num_recv_tokens_per_expert) are the caller's to compare, as in the fixed order.
// Mismatches (compare.hpp), one per fault: a received row that matches no expected row of its block is
// compared column by column with the unmatched expected row of the same payload when there is one (naming
// the field, source and column that differ), else reported as "matches no expected row" (column = its row
// index); an expected row that no received row matched is reported as "missing" with its source. A row
// count different from the expected one is one structural mismatch; the blocks inside both are still
// compared.
#pragma once

#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/expert_major.hpp"
#include "reference/dispatch/mismatch_report.hpp"
#include "reference/dispatch/rank_major.hpp"

namespace eps::dispatch {

MismatchReport compare_rank_major_open(const DispatchPlan& plan, const RankMajorExpected& expected,
                                       const RankMajorView& actual);

MismatchReport compare_expert_major_open(const DispatchPlan& plan, const ExpertMajorExpected& expected,
                                         const ExpertMajorView& actual);

}  // namespace eps::dispatch
