#include "impls/problem/transport_problem.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "reference/data/fill.hpp"
#include "reference/data/values.hpp"
#include "reference/data/workload.hpp"
#include "reference/dispatch/expert_major.hpp"
#include "reference/dispatch/layout.hpp"
#include "reference/dispatch/ll_dispatch.hpp"
#include "reference/dispatch/open_order.hpp"
#include "reference/dispatch/rank_major.hpp"
#include "reference/numerics/fp8.hpp"
#include "reference/numerics/quant.hpp"

namespace eps::problem {
namespace {

using dispatch::PayloadType;
using transport::Layout;

constexpr const char* kZeroTokenRanks = "zero-token-ranks";
// Bias rows are payload values of other seeds (offset from the payload seed).
constexpr std::uint64_t kBias0SeedOffset = 0xB1A5'0000;
constexpr std::uint64_t kBias1SeedOffset = 0xB1A5'0001;

void bias_row(std::uint64_t seed, int rank, int token, std::span<bf16> row) {
  for (std::size_t c = 0; c < row.size(); ++c) {
    row[c] = data::payload_value(seed, static_cast<std::uint32_t>(rank), static_cast<std::uint32_t>(token),
                                 static_cast<std::uint32_t>(c));
  }
}

Result<std::vector<std::int64_t>> tokens_per_rank(const ProblemShape& shape, bool zero_token_ranks,
                                                  std::uint64_t seed) {
  data::TokensPerRankSpec spec{data::TokensPerRankSpec::Kind::kRange, {0, shape.max_tokens}};
  if (shape.tokens_per_rank >= 0) spec = {data::TokensPerRankSpec::Kind::kFixed, {shape.tokens_per_rank}};
  EPS_ASSIGN_OR_RETURN(std::vector<std::int64_t> tokens,
                       data::resolve_tokens_per_rank(spec, shape.ranks, seed));
  if (zero_token_ranks) {
    for (std::size_t r = 0; r < tokens.size(); r += 2) tokens[r] = 0;
  }
  return tokens;
}

}  // namespace

ProblemShape default_shape(int ranks, const std::string& workload, PayloadType dtype,
                           const NodeLayout& real) {
  ProblemShape s;
  s.ranks = ranks;
  s.experts = ranks * std::max(2, (16 + ranks - 1) / ranks);
  s.top_k = workload == "spread" ? std::max(4, ranks) : 4;
  s.hidden = 256;
  s.max_tokens = 64;
  s.alignment = 1;
  s.nodes = real.nodes() > 1 ? real : value_or_throw(NodeLayout::uniform(ranks, ranks % 2 == 0 ? 2 : ranks));
  s.dtype = dtype;
  return s;
}

transport::TransportConfig transport_config(const ProblemShape& s, double timeout_seconds) {
  transport::TransportConfig c;
  c.comm = MPI_COMM_WORLD;
  c.num_experts = s.experts;
  c.top_k = s.top_k;
  c.hidden = s.hidden;
  c.max_tokens_per_rank = s.max_tokens;
  c.dtype = s.dtype;
  c.expert_alignment = s.alignment;
  c.nodes = s.nodes;
  c.timeout_seconds = timeout_seconds;
  return c;
}

void SeededRowSource::fill_values(int rank, int token, std::span<bf16> values) const {
  bias_row(seed_, rank, token, values);
}

void SeededRowSource::fill_row(int rank, int token, std::span<std::byte> row) const {
  std::vector<bf16> values(static_cast<std::size_t>(hidden_));
  fill_values(rank, token, values);
  if (dtype_ == PayloadType::kBf16) {
    std::memcpy(row.data(), values.data(), row.size());
    return;
  }
  std::vector<float> scales(static_cast<std::size_t>(hidden_ / dispatch::kFp8GroupSize));
  const Status s = quantize_fp8_per_token(values, 1, hidden_, mode_,
                                          {reinterpret_cast<std::uint8_t*>(row.data()), row.size()}, scales);
  if (!s.ok()) throw Error(s);  // shapes are validated when the plan is made
}

void SeededRowSource::fill_scales(int rank, int token, std::span<float> scales) const {
  std::vector<bf16> values(static_cast<std::size_t>(hidden_));
  fill_values(rank, token, values);
  std::vector<std::uint8_t> codes(values.size());
  const Status s = quantize_fp8_per_token(values, 1, hidden_, mode_, codes, scales);
  if (!s.ok()) throw Error(s);
}

Result<Problem> Problem::make(const ProblemShape& shape, const std::string& workload, int rank,
                              std::uint64_t routing_seed, int step, std::uint64_t payload_seed) {
  const bool zero_token_ranks = workload == kZeroTokenRanks;
  EPS_ASSIGN_OR_RETURN(data::WorkloadSpec spec,
                       data::parse_workload(zero_token_ranks ? "uniform" : workload));
  EPS_ASSIGN_OR_RETURN(
      std::vector<std::int64_t> tokens,
      tokens_per_rank(shape, zero_token_ranks, routing_seed + static_cast<std::uint64_t>(step)));
  const data::RoutingShape routing_shape{shape.ranks, shape.experts, shape.top_k};
  std::vector<dispatch::RankRouting> routing;
  for (int r = 0; r < shape.ranks; ++r) {
    const data::RoutingRequest request{
        .seed = routing_seed, .rank = r, .layer = 0, .step = step, .token_begin = 0, .num_tokens = tokens[r]};
    EPS_ASSIGN_OR_RETURN(data::Routing g, data::generate_routing(spec, routing_shape, request));
    routing.push_back({static_cast<int>(g.num_tokens), std::vector<int>(g.topk_idx.begin(), g.topk_idx.end()),
                       std::move(g.topk_weights)});
  }
  const dispatch::DispatchConfig config{shape.ranks,      shape.experts, shape.top_k,    shape.hidden,
                                        shape.max_tokens, shape.dtype,   shape.alignment};
  EPS_ASSIGN_OR_RETURN(dispatch::DispatchPlan plan, dispatch::DispatchPlan::make(config, std::move(routing)));
  Problem p(shape, std::move(plan), payload_seed, rank);
  p.fill_payloads();
  return p;
}

Problem Problem::with_payload(std::uint64_t payload_seed) const {
  Problem p(shape_, plan_, payload_seed, rank_);
  p.fill_payloads();
  return p;
}

void Problem::fill_payloads() {
  Problem& p = *this;
  const int rank = rank_;
  const std::uint64_t payload_seed = payload_seed_;
  const ProblemShape& shape = shape_;
  const int t_r = p.plan_.num_tokens(rank);
  const auto hidden = static_cast<std::size_t>(shape.hidden);
  // With `quantize` the transport gets the bf16 rows the reference quantizes, and makes the scales itself.
  const std::size_t row_bytes = shape.quantize ? hidden * sizeof(bf16) : p.plan_.row_bytes();
  const auto num_scales = static_cast<std::size_t>(shape.quantize ? 0 : p.plan_.num_scales());
  p.x_.resize(static_cast<std::size_t>(t_r) * row_bytes);
  p.x_scales_.resize(static_cast<std::size_t>(t_r) * num_scales);
  p.bias0_.resize(static_cast<std::size_t>(t_r) * hidden);
  p.bias1_.resize(p.bias0_.size());
  for (int t = 0; t < t_r; ++t) {
    const auto i = static_cast<std::size_t>(t);
    const std::span<std::byte> row = std::span(p.x_).subspan(i * row_bytes, row_bytes);
    if (shape.quantize) {
      p.source_.fill_values(rank, t, {reinterpret_cast<bf16*>(row.data()), hidden});
    } else {
      p.source_.fill_row(rank, t, row);
    }
    if (num_scales > 0)
      p.source_.fill_scales(rank, t, std::span(p.x_scales_).subspan(i * num_scales, num_scales));
    bias_row(payload_seed + kBias0SeedOffset, rank, t, std::span(p.bias0_).subspan(i * hidden, hidden));
    bias_row(payload_seed + kBias1SeedOffset, rank, t, std::span(p.bias1_).subspan(i * hidden, hidden));
  }
}

transport::DispatchInput Problem::input() const {
  const int t_r = plan_.num_tokens(rank_);
  const auto slots = static_cast<std::size_t>(t_r) * static_cast<std::size_t>(shape_.top_k);
  transport::DispatchInput in;
  in.num_tokens = t_r;
  in.x = x_;
  in.x_scales = x_scales_;
  in.quantize = shape_.quantize;
  if (t_r > 0) {  // the plan keeps a rank's routing contiguous, token after token
    in.topk_idx = std::span<const int>(plan_.topk_idx(rank_, 0).data(), slots);
    in.topk_weights = std::span<const float>(plan_.topk_weights(rank_, 0).data(), slots);
  }
  return in;
}

dispatch::CombineBias Problem::reference_bias() const {
  const std::uint64_t s0 = payload_seed_ + kBias0SeedOffset;
  const std::uint64_t s1 = payload_seed_ + kBias1SeedOffset;
  return {[s0](int r, int t, std::span<bf16> row) { bias_row(s0, r, t, row); },
          [s1](int r, int t, std::span<bf16> row) { bias_row(s1, r, t, row); }};
}

void transform_row(PayloadType dtype, std::span<const std::byte> row, std::span<const float> scales,
                   int shift, std::span<bf16> out) {
  const float factor = std::ldexp(1.0f, -shift);
  for (std::size_t c = 0; c < out.size(); ++c) {
    float v = 0.0f;
    if (dtype == PayloadType::kBf16) {
      std::uint16_t bits = 0;
      std::memcpy(&bits, row.data() + 2 * c, 2);
      v = bf16::from_bits(bits).to_float();
    } else {
      v = fp8_bits_to_fp32(static_cast<std::uint8_t>(row[c])) * scales[c / dispatch::kFp8GroupSize];
    }
    out[c] = bf16::from_float(v * factor);
  }
}

int ht_shift(int expert_rank) { return expert_rank % 3; }
int ll_shift(int expert) { return expert % 4; }

DispatchBuffers::DispatchBuffers(Layout layout_kind, const ProblemShape& s) : layout(layout_kind) {
  const transport::TransportConfig config = transport_config(s, 1.0);
  capacity = transport::recv_capacity_rows(layout, config, s.ranks);
  const auto rows = static_cast<std::size_t>(capacity);
  const std::size_t row_bytes = dispatch::payload_row_bytes(s.dtype, s.hidden);
  const auto num_scales = static_cast<std::size_t>(dispatch::payload_num_scales(s.dtype, s.hidden));
  const auto local = static_cast<std::size_t>(s.experts / s.ranks);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 0xff bytes: bf16 NaN bit patterns, fp8 NaN codes.
  recv_x.assign(rows * row_bytes, std::byte{0xff});
  recv_x_scales.assign(rows * num_scales, nan);
  num_recv_tokens_per_expert.assign(local, -7);
  if (layout == Layout::kHtRankMajor) {
    recv_topk_idx.assign(rows * s.top_k, -7);
    recv_topk_weights.assign(rows * s.top_k, nan);
  } else if (layout == Layout::kHtExpertMajor) {
    recv_weights.assign(rows, nan);
  } else {
    packed_recv_count.assign(local, -7);
    src_info.assign(rows, -7);
    layout_range.assign(local * s.ranks, transport::LlRange{-7, -7});
  }
}

transport::DispatchOutput DispatchBuffers::view() {
  return {recv_x,
          recv_x_scales,
          recv_topk_idx,
          recv_topk_weights,
          recv_weights,
          num_recv_tokens_per_expert,
          packed_recv_count,
          src_info,
          layout_range};
}

std::vector<bf16> expert_outputs(const ProblemShape& s, int rank, const DispatchBuffers& b,
                                 std::int64_t num_rows) {
  const auto hidden = static_cast<std::size_t>(s.hidden);
  const std::size_t row_bytes = dispatch::payload_row_bytes(s.dtype, s.hidden);
  const auto num_scales = static_cast<std::size_t>(dispatch::payload_num_scales(s.dtype, s.hidden));
  const int local = s.experts / s.ranks;
  const std::size_t rows =
      b.layout == Layout::kLl ? static_cast<std::size_t>(b.capacity) : static_cast<std::size_t>(num_rows);
  std::vector<bf16> y(rows * hidden);
  auto compute = [&](std::size_t row, int shift) {
    transform_row(s.dtype, std::span(b.recv_x).subspan(row * row_bytes, row_bytes),
                  std::span(b.recv_x_scales).subspan(row * num_scales, num_scales), shift,
                  std::span(y).subspan(row * hidden, hidden));
  };
  if (b.layout == Layout::kHtRankMajor) {
    for (std::size_t row = 0; row < rows; ++row) compute(row, ht_shift(rank));
    return y;
  }
  std::size_t begin = 0;
  for (int l = 0; l < local; ++l) {
    const int expert = rank * local + l;
    if (b.layout == Layout::kLl) {
      begin = static_cast<std::size_t>(l) * static_cast<std::size_t>(b.capacity / local);
      const int count = std::max(0, b.packed_recv_count[l]);
      for (int n = 0; n < count; ++n) compute(begin + n, ll_shift(expert));
      continue;
    }
    const int segment = std::max(0, b.num_recv_tokens_per_expert[l]);
    for (int n = 0; n < segment && begin + n < rows; ++n) compute(begin + n, ll_shift(expert));
    begin += static_cast<std::size_t>(segment);
  }
  return y;
}

dispatch::MismatchReport check_layout(const Problem& p, int rank, const dispatch::DispatchLayout& actual) {
  dispatch::MismatchReport report;
  const Result<dispatch::DispatchLayout> expected = dispatch::expected_layout(p.plan(), rank);
  if (!expected.ok()) {
    report.add({.field = "layout", .rank = rank, .note = expected.status().message()});
    return report;
  }
  dispatch::compare_array<int>(report, "num_tokens_per_rank", rank, expected->num_tokens_per_rank,
                               actual.num_tokens_per_rank);
  dispatch::compare_array<int>(report, "num_tokens_per_expert", rank, expected->num_tokens_per_expert,
                               actual.num_tokens_per_expert);
  dispatch::compare_array<std::uint8_t>(report, "is_token_in_rank", rank, expected->is_token_in_rank,
                                        actual.is_token_in_rank);
  dispatch::compare_array<int>(report, "rank_prefix_matrix", rank, expected->rank_prefix_matrix,
                               actual.rank_prefix_matrix);
  return report;
}

namespace {

// The shape's ht-two-level nodes (empty = one rank per node, as the transports read it).
NodeLayout two_level_nodes(const ProblemShape& s) {
  return s.nodes.node_of.empty() ? value_or_throw(NodeLayout::uniform(s.ranks, 1)) : s.nodes;
}

template <typename T>
std::span<const T> first(const std::vector<T>& v, std::int64_t n) {
  return std::span<const T>(v).first(
      std::min(v.size(), static_cast<std::size_t>(std::max<std::int64_t>(n, 0))));
}

dispatch::MismatchReport check_rank_major(const Problem& p, int rank, const DispatchBuffers& b,
                                          std::int64_t rows, bool fixed_order) {
  dispatch::MismatchReport report;
  const Result<dispatch::RankMajorExpected> expected =
      dispatch::expected_rank_major(p.plan(), rank, p.source());
  if (!expected.ok()) {
    report.add({.field = "expected_rank_major", .rank = rank, .note = expected.status().message()});
    return report;
  }
  const auto k = static_cast<std::int64_t>(p.plan().top_k());
  const dispatch::RankMajorView view{first(b.recv_x, rows * static_cast<std::int64_t>(p.plan().row_bytes())),
                                     first(b.recv_x_scales, rows * p.plan().num_scales()),
                                     first(b.recv_topk_idx, rows * k), first(b.recv_topk_weights, rows * k),
                                     b.num_recv_tokens_per_expert};
  return fixed_order ? dispatch::compare_rank_major(p.plan(), *expected, view)
                     : dispatch::compare_rank_major_open(p.plan(), *expected, view);
}

dispatch::MismatchReport check_expert_major(const Problem& p, int rank, const DispatchBuffers& b,
                                            std::int64_t rows, bool fixed_order) {
  dispatch::MismatchReport report;
  const Result<dispatch::ExpertMajorExpected> expected =
      dispatch::expected_expert_major(p.plan(), rank, p.source());
  if (!expected.ok()) {
    report.add({.field = "expected_expert_major", .rank = rank, .note = expected.status().message()});
    return report;
  }
  const dispatch::ExpertMajorView view{
      first(b.recv_x, rows * static_cast<std::int64_t>(p.plan().row_bytes())),
      first(b.recv_x_scales, rows * p.plan().num_scales()), first(b.recv_weights, rows)};
  report = fixed_order ? dispatch::compare_expert_major(p.plan(), *expected, view)
                       : dispatch::compare_expert_major_open(p.plan(), *expected, view);
  // Segment lengths (the aligned per-expert counts) of docs/dispatch.md 5.3.
  std::vector<int> segments;
  const std::vector<int>& begin = expected->index.segment_begin;
  for (std::size_t l = 0; l + 1 < begin.size(); ++l) segments.push_back(begin[l + 1] - begin[l]);
  dispatch::compare_array<int>(report, "num_recv_tokens_per_expert", rank, segments,
                               b.num_recv_tokens_per_expert);
  return report;
}

}  // namespace

dispatch::MismatchReport check_dispatch(const Problem& p, int rank, const DispatchBuffers& b,
                                        std::int64_t num_rows, bool fixed_order) {
  switch (b.layout) {
    case Layout::kHtRankMajor:
      return check_rank_major(p, rank, b, num_rows, fixed_order);
    case Layout::kHtExpertMajor:
      return check_expert_major(p, rank, b, num_rows, fixed_order);
    case Layout::kLl:
      break;
  }
  const dispatch::LlView view{b.recv_x, b.recv_x_scales, b.packed_recv_count, b.src_info, b.layout_range};
  Result<dispatch::MismatchReport> report =
      dispatch::check_ll_dispatch(p.plan(), rank, p.source(), view,
                                  fixed_order ? dispatch::LlOrder::kOrdered : dispatch::LlOrder::kUnordered);
  if (report.ok()) return *report;
  dispatch::MismatchReport failed;
  failed.add({.field = "check_ll_dispatch", .rank = rank, .note = report.status().message()});
  return failed;
}

Result<std::vector<bf16>> expected_combine(const Problem& p, int rank, transport::CombineTree tree,
                                           bool with_bias) {
  const ProblemShape& s = p.shape();
  const std::size_t row_bytes = p.plan().row_bytes();
  const auto num_scales = static_cast<std::size_t>(p.plan().num_scales());
  const SeededRowSource& source = p.source();
  // The expert side's function, applied to the regenerated source row.
  auto from_source = [&s, &source, row_bytes, num_scales](int r, int t, int shift, std::span<bf16> row) {
    std::vector<std::byte> x(row_bytes);
    std::vector<float> scales(num_scales);
    source.fill_row(r, t, x);
    if (num_scales > 0) source.fill_scales(r, t, scales);
    transform_row(s.dtype, x, scales, shift, row);
  };
  const dispatch::PartialRowFn partial = [&](int q, int r, int t, std::span<bf16> row) {
    from_source(r, t, ht_shift(q), row);
  };
  const dispatch::CombineBias bias = with_bias ? p.reference_bias() : dispatch::CombineBias{};
  const dispatch::DispatchPlan& plan = p.plan();
  const dispatch::SlotOutputFn slot_output = [&](int r, int t, int k, std::span<bf16> row) {
    from_source(r, t, ll_shift(plan.topk_idx(r, t)[k]), row);
  };
  return tree == transport::CombineTree::kLlWeighted ? dispatch::expected_ll_combine(plan, rank, slot_output)
         : tree == transport::CombineTree::kHtRank
             ? dispatch::expected_ht_rank_combine(plan, rank, partial, bias)
             : dispatch::expected_ht_two_level_combine(plan, rank, two_level_nodes(s), partial, bias);
}

Result<dispatch::MismatchReport> check_combine(const Problem& p, int rank, transport::CombineTree tree,
                                               bool with_bias, std::span<const bf16> out,
                                               std::span<const float> combined_weights) {
  EPS_ASSIGN_OR_RETURN(const std::vector<bf16> expected, expected_combine(p, rank, tree, with_bias));
  dispatch::MismatchReport report = dispatch::compare_combine(p.plan(), rank, expected, out);
  if (!combined_weights.empty())
    report.merge(dispatch::compare_combined_weights(p.plan(), rank, combined_weights));
  return report;
}

}  // namespace eps::problem
