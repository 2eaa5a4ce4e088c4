// Properties of the dispatch/combine expectations on random workloads (docs/dispatch.md 5.1-5.6), checked
// against brute-force oracles written here from the formulas of docs/dispatch.md (default placement: expert e
// on rank e / L, local e % L). Covers R = 1, non-power-of-two R (3, 6), zero-token ranks, masked and
// all-masked tokens.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "reference/dispatch/byte_accounting.hpp"
#include "reference/dispatch/combine.hpp"
#include "reference/dispatch/expert_major.hpp"
#include "reference/dispatch/layout.hpp"
#include "reference/dispatch/ll_dispatch.hpp"
#include "reference/dispatch/rank_major.hpp"
#include "reference/dispatch/tests/test_support.hpp"

namespace eps::dispatch {
namespace {

using testing::HashRowSource;

struct Workload {
  int num_ranks;
  int num_experts;
  int top_k;
  int max_tokens;
  double mask_prob;
  int alignment;
};

void PrintTo(const Workload& w, std::ostream* os) {
  *os << "R" << w.num_ranks << "_E" << w.num_experts << "_K" << w.top_k << "_T" << w.max_tokens << "_mask"
      << w.mask_prob << "_align" << w.alignment;
}

class DispatchProperties : public ::testing::TestWithParam<Workload> {
 protected:
  void SetUp() override {
    const Workload& w = GetParam();
    std::mt19937 rng(1234 + w.num_ranks * 31 + w.top_k);
    routing_ = testing::random_routing(rng, w.num_ranks, w.num_experts, w.top_k, w.max_tokens, w.mask_prob);
    if (w.num_ranks > 1) routing_[1] = RankRouting{};  // always one zero-token rank
    DispatchConfig config{.num_ranks = w.num_ranks,
                          .num_experts = w.num_experts,
                          .top_k = w.top_k,
                          .hidden = 16,
                          .max_tokens_per_rank = w.max_tokens,
                          .expert_alignment = w.alignment};
    plan_.emplace(value_or_throw(DispatchPlan::make(config, routing_)));
    local_ = w.num_experts / w.num_ranks;
  }

  int expert(int r, int t, int k) const {
    return routing_[r].topk_idx[static_cast<std::size_t>(t) * GetParam().top_k + k];
  }
  float weight(int r, int t, int k) const {
    return routing_[r].topk_weights[static_cast<std::size_t>(t) * GetParam().top_k + k];
  }
  int num_tokens(int r) const { return routing_[r].num_tokens; }
  bool oracle_sends(int r, int t, int q) const {
    for (int k = 0; k < GetParam().top_k; ++k) {
      if (expert(r, t, k) >= 0 && expert(r, t, k) / local_ == q) return true;
    }
    return false;
  }
  // Oracle rank-major sources of q: (r asc, t asc).
  std::vector<SourceToken> oracle_sources(int q) const {
    std::vector<SourceToken> out;
    for (int r = 0; r < GetParam().num_ranks; ++r) {
      for (int t = 0; t < num_tokens(r); ++t) {
        if (oracle_sends(r, t, q)) out.push_back({r, t});
      }
    }
    return out;
  }

  std::vector<RankRouting> routing_;
  std::optional<DispatchPlan> plan_;
  int local_ = 0;
};

TEST_P(DispatchProperties, RankMajorIsTheOrderedSetOfReceivers) {
  const Workload& w = GetParam();
  std::int64_t total_rows = 0;
  std::int64_t total_pairs = 0;
  for (int r = 0; r < w.num_ranks; ++r) {
    for (int t = 0; t < num_tokens(r); ++t) {
      for (int q = 0; q < w.num_ranks; ++q) total_pairs += oracle_sends(r, t, q);
    }
  }
  const HashRowSource source(plan_->row_bytes(), 0);
  for (int q = 0; q < w.num_ranks; ++q) {
    const RankMajorExpected e = value_or_throw(expected_rank_major(*plan_, q, source));
    // Every (r, t, q) pair exactly once, in (r, t) order.
    ASSERT_EQ(e.index.sources, oracle_sources(q));
    total_rows += static_cast<std::int64_t>(e.index.num_rows());
    std::vector<int> per_local(local_, 0);
    for (std::size_t i = 0; i < e.index.num_rows(); ++i) {
      const auto [r, t] = e.index.sources[i];
      for (int k = 0; k < w.top_k; ++k) {
        const int ex = expert(r, t, k);
        const bool here = ex >= 0 && ex / local_ == q;
        ASSERT_EQ(e.index.recv_topk_idx[i * w.top_k + k], here ? ex % local_ : -1);
        const float want = here ? weight(r, t, k) : 0.0f;
        ASSERT_EQ(float_bits(e.index.recv_topk_weights[i * w.top_k + k]), float_bits(want));
        if (here) ++per_local[ex % local_];
      }
      for (std::size_t b = 0; b < plan_->row_bytes(); ++b) {
        ASSERT_EQ(e.recv_x[i * plan_->row_bytes() + b], std::byte{HashRowSource::byte_at(r, t, b)});
      }
    }
    for (int& c : per_local) c = (c + w.alignment - 1) / w.alignment * w.alignment;
    EXPECT_EQ(e.index.num_recv_tokens_per_expert, per_local);
  }
  EXPECT_EQ(total_rows, total_pairs);
}

TEST_P(DispatchProperties, LayoutCountsAgree) {
  const Workload& w = GetParam();
  const int n = w.num_ranks;
  std::vector<int> received(n, 0);
  std::vector<int> per_slot(static_cast<std::size_t>(w.num_experts), 0);
  std::vector<int> prefix;
  for (int r = 0; r < n; ++r) {
    const DispatchLayout layout = value_or_throw(expected_layout(*plan_, r));
    if (r == 0) prefix = layout.rank_prefix_matrix;
    EXPECT_EQ(layout.rank_prefix_matrix, prefix);
    ASSERT_EQ(layout.is_token_in_rank.size(), static_cast<std::size_t>(num_tokens(r)) * n);
    for (int q = 0; q < n; ++q) {
      int in_rank = 0;
      for (int t = 0; t < num_tokens(r); ++t) {
        EXPECT_EQ(layout.is_token_in_rank[static_cast<std::size_t>(t) * n + q],
                  oracle_sends(r, t, q) ? 1 : 0);
        in_rank += oracle_sends(r, t, q);
      }
      EXPECT_EQ(layout.num_tokens_per_rank[q], in_rank);
      received[q] += in_rank;
      // Prefix matrix: [r][q] = rows q receives from ranks 0..r, non-decreasing in r.
      EXPECT_EQ(prefix[static_cast<std::size_t>(r) * n + q], received[q]);
      if (r > 0) {
        EXPECT_GE(prefix[static_cast<std::size_t>(r) * n + q],
                  prefix[static_cast<std::size_t>(r - 1) * n + q]);
      }
    }
    for (int e = 0; e < w.num_experts; ++e) per_slot[e] += layout.num_tokens_per_expert[e];
  }
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(static_cast<std::size_t>(received[q]), value_or_throw(rank_major_index(*plan_, q)).num_rows());
    // LL counts = valid local slots = Σ_r num_tokens_per_expert over q's experts.
    const LlIndex ll = value_or_throw(ll_index(*plan_, q));
    const ExpertMajorIndex em = value_or_throw(expert_major_index(*plan_, q));
    for (int l = 0; l < local_; ++l) {
      EXPECT_EQ(ll.packed_recv_count[l], per_slot[q * local_ + l]);
      EXPECT_EQ(em.counts[l], per_slot[q * local_ + l]);
    }
  }
}

TEST_P(DispatchProperties, LowLatencyHoldsEveryLocalSelectionOnce) {
  const Workload& w = GetParam();
  const HashRowSource source(plan_->row_bytes(), 0);
  for (int q = 0; q < w.num_ranks; ++q) {
    const LlIndex ll = value_or_throw(ll_index(*plan_, q));
    std::multiset<std::tuple<int, int, int>> seen;  // (r, t, k)
    for (int l = 0; l < local_; ++l) {
      for (int r = 0; r < w.num_ranks; ++r) {
        const LlRange range = ll.layout_range[static_cast<std::size_t>(l) * w.num_ranks + r];
        for (int i = range.begin; i < range.begin + range.count; ++i) {
          const std::size_t row = static_cast<std::size_t>(l) * ll.capacity + i;
          const int t = ll.src_info[row];
          const int k = ll.src_slot[row];
          EXPECT_EQ(expert(r, t, k), q * local_ + l);
          if (i > range.begin) {
            EXPECT_LT(ll.src_info[row - 1], t);  // ascending t in the ordered form
          }
          seen.insert({r, t, k});
        }
      }
    }
    std::multiset<std::tuple<int, int, int>> want;
    for (int r = 0; r < w.num_ranks; ++r) {
      for (int t = 0; t < num_tokens(r); ++t) {
        for (int k = 0; k < w.top_k; ++k) {
          if (expert(r, t, k) >= 0 && expert(r, t, k) / local_ == q) want.insert({r, t, k});
        }
      }
    }
    EXPECT_EQ(seen, want);
    const LlExpected e = value_or_throw(expected_ll(*plan_, q, source));
    const LlView view{e.packed_recv_x, e.packed_recv_x_scales, e.index.packed_recv_count, e.index.src_info,
                      e.index.layout_range};
    const MismatchReport report =
        value_or_throw(check_ll_dispatch(*plan_, q, source, view, LlOrder::kOrdered));
    EXPECT_TRUE(report.ok()) << report.to_string();
  }
}

TEST_P(DispatchProperties, ExpertMajorIsLexicographicAndPadded) {
  const Workload& w = GetParam();
  const HashRowSource source(plan_->row_bytes(), 0);
  for (int q = 0; q < w.num_ranks; ++q) {
    const ExpertMajorExpected e = value_or_throw(expected_expert_major(*plan_, q, source));
    for (int l = 0; l < local_; ++l) {
      const int begin = e.index.segment_begin[l];
      const int end = e.index.segment_begin[l + 1];
      EXPECT_EQ(end - begin, (e.index.counts[l] + w.alignment - 1) / w.alignment * w.alignment);
      for (int i = begin; i < end; ++i) {
        const ExpertMajorRow& row = e.index.rows[i];
        EXPECT_EQ(row.local_expert, l);
        const bool padding = i >= begin + e.index.counts[l];
        for (std::size_t b = 0; b < plan_->row_bytes(); ++b) {
          const std::byte want =
              padding ? std::byte{0}
                      : std::byte{HashRowSource::byte_at(row.source.rank, row.source.token, b)};
          ASSERT_EQ(e.recv_x[static_cast<std::size_t>(i) * plan_->row_bytes() + b], want);
        }
        if (padding) {
          EXPECT_EQ(row.source, (SourceToken{-1, -1}));
          continue;
        }
        EXPECT_EQ(expert(row.source.rank, row.source.token, row.slot), q * local_ + l);
        EXPECT_EQ(float_bits(row.weight), float_bits(weight(row.source.rank, row.source.token, row.slot)));
        if (i > begin) {
          const SourceToken prev = e.index.rows[i - 1].source;
          EXPECT_TRUE(std::tie(prev.rank, prev.token) < std::tie(row.source.rank, row.source.token));
        }
      }
    }
  }
}

// A bf16 value derived from (a, b, c, h) by a hash, small multiples of 2^-6 so sums are not all exact.
bf16 hashed_value(int a, int b, int c, int h) {
  const std::uint8_t v = HashRowSource::byte_at(a * 131 + b, c * 17 + 3, static_cast<std::size_t>(h));
  return bf16::from_float(static_cast<float>(static_cast<int>(v) - 128) / 64.0f *
                          (h % 3 == 0 ? 1.0f / 1024 : 1.0f));
}

TEST_P(DispatchProperties, CombineTreesMatchBruteForce) {
  const Workload& w = GetParam();
  const int hidden = plan_->hidden();
  const PartialRowFn partial = [&](int q, int r, int t, std::span<bf16> row) {
    ASSERT_TRUE(oracle_sends(r, t, q));
    for (int h = 0; h < hidden; ++h) row[h] = hashed_value(q, r, t, h);
  };
  const CombineBias bias{[&](int r, int t, std::span<bf16> row) {
                           for (int h = 0; h < hidden; ++h) row[h] = hashed_value(-1, r, t, h);
                         },
                         {}};
  const SlotOutputFn y = [&](int r, int t, int k, std::span<bf16> row) {
    for (int h = 0; h < hidden; ++h) row[h] = hashed_value(r, t, k, h + 7);
  };
  // Uniform nodes, nodes of 1 and R - 1 ranks, and nodes of non-consecutive ranks (docs/dispatch.md 5.5.1).
  std::vector<int> uniform, first_alone, interleaved;
  for (int q = 0; q < w.num_ranks; ++q) {
    uniform.push_back(w.num_ranks % 2 == 0 ? q / 2 : q);
    first_alone.push_back(q == 0 ? 0 : 1);
    interleaved.push_back(q % 3 == 1 ? 1 : 0);
  }
  for (const std::vector<int>& groups : {uniform, first_alone, interleaved}) {
    const NodeLayout nodes = NodeLayout::from_groups(groups);
    std::vector<int> labels_by_lowest_rank;
    for (int g : groups) {
      if (std::find(labels_by_lowest_rank.begin(), labels_by_lowest_rank.end(), g) ==
          labels_by_lowest_rank.end())
        labels_by_lowest_rank.push_back(g);
    }
    for (int r = 0; r < w.num_ranks; ++r) {
      const auto ht = value_or_throw(expected_ht_rank_combine(*plan_, r, partial, bias));
      const auto two = value_or_throw(expected_ht_two_level_combine(*plan_, r, nodes, partial, bias));
      const auto ll = value_or_throw(expected_ll_combine(*plan_, r, y));
      for (int t = 0; t < num_tokens(r); ++t) {
        for (int h = 0; h < hidden; ++h) {
          const std::size_t i = static_cast<std::size_t>(t) * hidden + h;
          float acc = hashed_value(-1, r, t, h).to_float() + 0.0f;
          float two_acc = acc;
          for (int label : labels_by_lowest_rank) {
            float node_acc = 0.0f;
            bool any = false;
            for (int q = 0; q < w.num_ranks; ++q) {
              if (groups[q] != label) continue;
              if (!oracle_sends(r, t, q)) continue;
              acc += hashed_value(q, r, t, h).to_float();
              node_acc += hashed_value(q, r, t, h).to_float();
              any = true;
            }
            if (any) two_acc += bf16::from_float(node_acc).to_float();
          }
          ASSERT_EQ(ht[i].bits, bf16::from_float(acc).bits) << r << " " << t << " " << h;
          ASSERT_EQ(two[i].bits, bf16::from_float(two_acc).bits) << r << " " << t << " " << h;
          float ll_acc = 0.0f;
          for (int k = 0; k < w.top_k; ++k) {
            if (expert(r, t, k) < 0) continue;
            const float product = weight(r, t, k) * hashed_value(r, t, k, h + 7).to_float();
            ll_acc += product;
          }
          ASSERT_EQ(ll[i].bits, bf16::from_float(ll_acc).bits);
        }
      }
    }
  }
}

TEST_P(DispatchProperties, ByteAccountingMatchesRowCounts) {
  const Workload& w = GetParam();
  const ByteAccount a = account_bytes(*plan_);
  const std::int64_t row = 2 * plan_->hidden();  // bf16 payload: HT row = LL message = combine row = 2H
  std::int64_t recv = 0;
  std::int64_t send = 0;
  for (int q = 0; q < w.num_ranks; ++q) {
    const RankMajorIndex index = value_or_throw(rank_major_index(*plan_, q));
    std::int64_t self = 0;
    for (const SourceToken& s : index.sources) self += s.rank == q;
    EXPECT_EQ(a.ht_dispatch[q].recv.algo, static_cast<std::int64_t>(index.num_rows()) * row);
    EXPECT_EQ(a.ht_dispatch[q].recv.physical, (static_cast<std::int64_t>(index.num_rows()) - self) * row);
    EXPECT_EQ(a.ht_combine[q].send, a.ht_dispatch[q].recv);
    const LlIndex ll = value_or_throw(ll_index(*plan_, q));
    std::int64_t selections = 0;
    for (int c : ll.packed_recv_count) selections += c;
    EXPECT_EQ(a.ll_dispatch[q].recv.algo, selections * row);
    recv += a.ll_dispatch[q].recv.physical;
    send += a.ll_dispatch[q].send.physical;
  }
  EXPECT_EQ(recv, send);
}

INSTANTIATE_TEST_SUITE_P(Workloads, DispatchProperties,
                         ::testing::Values(Workload{1, 4, 2, 6, 0.1, 1}, Workload{2, 8, 3, 7, 0.2, 1},
                                           Workload{3, 9, 4, 8, 0.3, 4}, Workload{6, 12, 3, 6, 0.25, 3},
                                           Workload{8, 32, 8, 9, 0.1, 2}, Workload{4, 8, 2, 5, 1.0, 1}));

TEST(AllMasked, TokensAppearNowhereAndCombineToPlusZero) {
  DispatchConfig config{.num_ranks = 3, .num_experts = 6, .top_k = 2, .hidden = 4, .max_tokens_per_rank = 2};
  std::vector<RankRouting> routing(3, testing::routing(2, {-1, -1, -1, -1}, {1, 2, 3, 4}));
  const DispatchPlan plan = value_or_throw(DispatchPlan::make(config, routing));
  const SlotOutputFn y = [](int, int, int, std::span<bf16>) { ADD_FAILURE() << "masked slot read"; };
  const PartialRowFn partial = [](int, int, int, std::span<bf16>) { ADD_FAILURE() << "no destination"; };
  for (int q = 0; q < 3; ++q) {
    EXPECT_EQ(value_or_throw(rank_major_index(plan, q)).num_rows(), 0u);
    EXPECT_EQ(value_or_throw(expert_major_index(plan, q)).rows.size(), 0u);
    EXPECT_EQ(value_or_throw(ll_index(plan, q)).packed_recv_count, (std::vector<int>{0, 0}));
    EXPECT_EQ(value_or_throw(expected_layout(plan, q)).num_tokens_per_rank, (std::vector<int>{0, 0, 0}));
    for (bf16 v : value_or_throw(expected_ll_combine(plan, q, y))) EXPECT_EQ(v.bits, 0x0000);
    for (bf16 v : value_or_throw(expected_ht_rank_combine(plan, q, partial))) EXPECT_EQ(v.bits, 0x0000);
  }
  EXPECT_EQ(rank_prefix_matrix(plan), std::vector<int>(9, 0));
}

TEST(Fp8Payload, RowsCarryCodesAndScalesUnchanged) {
  // R = 2, E = 2, K = 1, H = 256 (2 scales per row). Rank 0: t0 -> e1 (rank 1), t1 -> e0 (rank 0);
  // rank 1: t0 -> e1 (rank 1). Scales include -0.0, a subnormal, a NaN with payload and infinity, which
  // a transport must move as raw bits.
  DispatchConfig config{.num_ranks = 2,
                        .num_experts = 2,
                        .top_k = 1,
                        .hidden = 256,
                        .max_tokens_per_rank = 2,
                        .dtype = PayloadType::kFp8};
  const DispatchPlan plan = value_or_throw(
      DispatchPlan::make(config, {testing::routing(2, {1, 0}, {1, 1}), testing::routing(1, {1}, {1})}));
  auto bits = [](std::uint32_t u) { return bits_float(u); };
  std::vector<std::vector<float>> scales{{bits(0x80000000u), bits(0x00000001u), bits(0x7fc01234u), 3.5f},
                                         {bits(0x7f800000u), 0.0078125f}};
  std::vector<std::vector<std::byte>> rows(2);
  for (int r = 0; r < 2; ++r) {
    for (int t = 0; t < static_cast<int>(scales[r].size() / 2); ++t) {
      for (int c = 0; c < 256; ++c)
        rows[r].push_back(std::byte{static_cast<std::uint8_t>(c * 7 + t * 3 + r * 101)});
    }
  }
  const auto source = value_or_throw(MaterializedRowSource::make(PayloadType::kFp8, 256, rows, scales));
  auto row_bytes = [&](int r, int t) {
    return std::vector<std::byte>(rows[r].begin() + t * 256, rows[r].begin() + (t + 1) * 256);
  };
  auto scale_bits = [&](int r, int t) {
    return std::vector<std::uint32_t>{float_bits(scales[r][2 * t]), float_bits(scales[r][2 * t + 1])};
  };
  auto to_bits = [](std::span<const float> v) {
    std::vector<std::uint32_t> out;
    for (float f : v) out.push_back(float_bits(f));
    return out;
  };
  // Rank 1 receives (0, 0) and (1, 0), rank-major.
  const RankMajorExpected q1 = value_or_throw(expected_rank_major(plan, 1, source));
  ASSERT_EQ(q1.index.sources, (std::vector<SourceToken>{{0, 0}, {1, 0}}));
  EXPECT_EQ(std::vector<std::byte>(q1.recv_x.begin(), q1.recv_x.begin() + 256), row_bytes(0, 0));
  EXPECT_EQ(std::vector<std::byte>(q1.recv_x.begin() + 256, q1.recv_x.end()), row_bytes(1, 0));
  std::vector<std::uint32_t> want = scale_bits(0, 0);
  const std::vector<std::uint32_t> second = scale_bits(1, 0);
  want.insert(want.end(), second.begin(), second.end());
  EXPECT_EQ(to_bits(q1.recv_x_scales), want);
  // Expert-major (alignment 1) and LL hold the same two rows on local expert 0 in the same order.
  EXPECT_EQ(to_bits(value_or_throw(expected_expert_major(plan, 1, source)).recv_x_scales), want);
  const LlExpected ll = value_or_throw(expected_ll(plan, 1, source));
  EXPECT_EQ(to_bits(std::span<const float>(ll.packed_recv_x_scales).subspan(0, 4)), want);
  // Rank 0 receives (0, 1): scales [NaN payload, 3.5].
  EXPECT_EQ(to_bits(value_or_throw(expected_rank_major(plan, 0, source)).recv_x_scales), scale_bits(0, 1));
  // The comparison flags one flipped scale bit.
  std::vector<float> actual_scales = q1.recv_x_scales;
  actual_scales[2] = bits(float_bits(actual_scales[2]) ^ 1u);
  const RankMajorView view{q1.recv_x, actual_scales, q1.index.recv_topk_idx, q1.index.recv_topk_weights,
                           q1.index.num_recv_tokens_per_expert};
  const MismatchReport report = compare_rank_major(plan, q1, view);
  EXPECT_EQ(report.mismatches(), 1);
  EXPECT_EQ(report.first()->field, "recv_x_scales");
  EXPECT_EQ(report.first()->src_rank, 1);
  EXPECT_EQ(report.first()->column, 0);
}

}  // namespace
}  // namespace eps::dispatch
