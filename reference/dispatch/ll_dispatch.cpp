#include "reference/dispatch/ll_dispatch.hpp"

#include <algorithm>

#include "reference/dispatch/detail.hpp"

namespace eps::dispatch {
namespace {

struct BlockRow {
  int token;
  int slot;
};

// Expected rows of every block (l, r) of rank q, [L · R], tokens ascending.
std::vector<std::vector<BlockRow>> expected_blocks(const DispatchPlan& plan, int rank) {
  const int num_ranks = plan.num_ranks();
  std::vector<std::vector<BlockRow>> blocks(static_cast<std::size_t>(plan.num_local_experts()) * num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    for (int t = 0; t < plan.num_tokens(r); ++t) {
      for (int k = 0; k < plan.top_k(); ++k) {
        const SlotPlacement p = plan.placement(r, t, k);
        if (p.rank == rank) blocks[static_cast<std::size_t>(p.local) * num_ranks + r].push_back({t, k});
      }
    }
  }
  return blocks;
}

Status check_view_size(std::string_view field, std::size_t expected, std::size_t actual) {
  if (expected == actual) return Status::ok_status();
  return invalid_argument(field, "size must be {}, got {}", expected, actual);
}

Status check_view(const DispatchPlan& plan, const LlView& v) {
  const auto num_local = static_cast<std::size_t>(plan.num_local_experts());
  const std::size_t rows = num_local * static_cast<std::size_t>(plan.num_ranks()) *
                           static_cast<std::size_t>(plan.config().max_tokens_per_rank);
  EPS_RETURN_IF_ERROR(check_view_size("packed_recv_x", rows * plan.row_bytes(), v.packed_recv_x.size()));
  EPS_RETURN_IF_ERROR(check_view_size("packed_recv_x_scales",
                                      rows * static_cast<std::size_t>(plan.num_scales()),
                                      v.packed_recv_x_scales.size()));
  EPS_RETURN_IF_ERROR(check_view_size("packed_recv_count", num_local, v.packed_recv_count.size()));
  EPS_RETURN_IF_ERROR(check_view_size("src_info", rows, v.src_info.size()));
  return check_view_size("layout_range", num_local * static_cast<std::size_t>(plan.num_ranks()),
                         v.layout_range.size());
}

// Checks one expert's rows; `blocks` are the expected blocks of this expert, [R].
class ExpertChecker {
 public:
  ExpertChecker(const DispatchPlan& plan, int rank, int local, const RowSource& source, const LlView& actual,
                LlOrder order, MismatchReport& report)
      : plan_(plan),
        rank_(rank),
        local_(local),
        source_(source),
        actual_(actual),
        order_(order),
        report_(report) {
    capacity_ = static_cast<std::size_t>(plan.num_ranks()) *
                static_cast<std::size_t>(plan.config().max_tokens_per_rank);
    row_.resize(plan.row_bytes());
    scales_.resize(static_cast<std::size_t>(plan.num_scales()));
  }

  void run(std::span<const std::vector<BlockRow>> blocks) {
    int expected_count = 0;
    for (const auto& block : blocks) expected_count += static_cast<int>(block.size());
    const int count = actual_.packed_recv_count[local_];
    if (count != expected_count) {
      fault("packed_recv_count", local_, -1, -1, expected_count, count, "");
      if (count < 0 || static_cast<std::size_t>(count) > capacity_) return;  // nothing else is addressable
    }
    owner_.assign(static_cast<std::size_t>(count), -1);
    int canonical_begin = 0;
    for (int r = 0; r < plan_.num_ranks(); ++r) {
      check_block(r, blocks[r], canonical_begin, count);
      canonical_begin += static_cast<int>(blocks[r].size());
    }
    for (int i = 0; i < count; ++i) {
      if (owner_[i] < 0) fault("layout_range", i, -1, -1, 0, 0, "row not covered by any block");
    }
  }

 private:
  void fault(std::string_view field, std::int64_t column, int src_rank, int src_token, std::uint64_t expected,
             std::uint64_t actual, std::string note) {
    report_.add(
        Mismatch{std::string(field), rank_, src_rank, src_token, column, expected, actual, std::move(note)});
  }

  std::int64_t range_column(int r) const { return static_cast<std::int64_t>(local_) * plan_.num_ranks() + r; }

  void check_block(int r, const std::vector<BlockRow>& expected, int canonical_begin, int count) {
    const LlRange range = actual_.layout_range[static_cast<std::size_t>(range_column(r))];
    if (range.count != static_cast<int>(expected.size())) {
      fault("layout_range", range_column(r), r, -1, expected.size(), static_cast<std::uint64_t>(range.count),
            "block count");
    }
    if (range.count <= 0) return;
    if (range.begin < 0 || range.begin > count - range.count) {
      fault("layout_range", range_column(r), r, -1, static_cast<std::uint64_t>(count),
            static_cast<std::uint64_t>(range.begin), "block outside [0, count)");
      return;
    }
    if (order_ == LlOrder::kOrdered && range.begin != canonical_begin) {
      fault("layout_range", range_column(r), r, -1, static_cast<std::uint64_t>(canonical_begin),
            static_cast<std::uint64_t>(range.begin), "block begin (ordered)");
    }
    for (int i = range.begin; i < range.begin + range.count; ++i) {
      if (owner_[i] >= 0) {
        fault("layout_range", range_column(r), r, -1, static_cast<std::uint64_t>(owner_[i]),
              static_cast<std::uint64_t>(r),
              fmt::format("row {} overlaps the block of source rank {}", i, owner_[i]));
      }
      owner_[i] = r;
    }
    check_rows(r, expected, range);
  }

  void check_rows(int r, const std::vector<BlockRow>& expected, LlRange range) {
    std::vector<char> seen(expected.size(), 0);
    for (int i = 0; i < range.count; ++i) {
      const std::size_t row =
          static_cast<std::size_t>(local_) * capacity_ + static_cast<std::size_t>(range.begin + i);
      const int token = actual_.src_info[row];
      const auto it = std::lower_bound(expected.begin(), expected.end(), token,
                                       [](const BlockRow& a, int t) { return a.token < t; });
      const bool known = it != expected.end() && it->token == token;
      const auto position = static_cast<std::size_t>(it - expected.begin());
      if (!known || seen[position]) {
        fault("src_info", range.begin + i, r, token, 0,
              static_cast<std::uint64_t>(static_cast<std::uint32_t>(token)),
              known ? "token repeated in block" : "token not expected in block");
        continue;
      }
      seen[position] = 1;
      if (order_ == LlOrder::kOrdered && position != static_cast<std::size_t>(i)) {
        const int wanted = static_cast<std::size_t>(i) < expected.size() ? expected[i].token : -1;
        fault("src_info", range.begin + i, r, token,
              static_cast<std::uint64_t>(static_cast<std::uint32_t>(wanted)),
              static_cast<std::uint64_t>(token), "token out of place (ordered)");
      }
      check_payload(r, token, row);
    }
    for (std::size_t j = 0; j < expected.size(); ++j) {
      if (!seen[j])
        fault("src_info", -1, r, expected[j].token, static_cast<std::uint64_t>(expected[j].token), 0,
              "expected token missing from block");
    }
  }

  void check_payload(int r, int token, std::size_t row) {
    const std::size_t elem = detail::element_bytes(plan_);
    const SourceToken src{r, token};
    source_.fill_row(r, token, row_);
    compare_rows_bits(report_, "packed_recv_x", rank_, std::span(&src, 1), row_.data(), row_.size() / elem,
                      actual_.packed_recv_x.data() + row * row_.size(), row_.size() / elem, elem,
                      row_.size() / elem);
    if (scales_.empty()) return;
    source_.fill_scales(r, token, scales_);
    compare_rows<float>(report_, "packed_recv_x_scales", rank_, std::span(&src, 1), scales_,
                        actual_.packed_recv_x_scales.subspan(row * scales_.size(), scales_.size()),
                        scales_.size());
  }

  const DispatchPlan& plan_;
  int rank_;
  int local_;
  const RowSource& source_;
  const LlView& actual_;
  LlOrder order_;
  MismatchReport& report_;
  std::size_t capacity_ = 0;
  std::vector<int> owner_;  // source rank owning each row of [0, count), -1 = none yet
  std::vector<std::byte> row_;
  std::vector<float> scales_;
};

}  // namespace

Result<LlIndex> ll_index(const DispatchPlan& plan, int rank) {
  EPS_RETURN_IF_ERROR(detail::check_rank(plan, rank));
  const int num_ranks = plan.num_ranks();
  const int num_local = plan.num_local_experts();
  LlIndex index;
  index.rank = rank;
  index.capacity = num_ranks * plan.config().max_tokens_per_rank;
  const auto capacity = static_cast<std::size_t>(index.capacity);
  index.packed_recv_count.assign(num_local, 0);
  index.layout_range.resize(static_cast<std::size_t>(num_local) * num_ranks);
  index.src_info.assign(static_cast<std::size_t>(num_local) * capacity, -1);
  index.src_slot.assign(static_cast<std::size_t>(num_local) * capacity, -1);
  const std::vector<std::vector<BlockRow>> blocks = expected_blocks(plan, rank);
  for (int l = 0; l < num_local; ++l) {
    int& count = index.packed_recv_count[l];
    for (int r = 0; r < num_ranks; ++r) {
      const std::vector<BlockRow>& block = blocks[static_cast<std::size_t>(l) * num_ranks + r];
      index.layout_range[static_cast<std::size_t>(l) * num_ranks + r] = {count,
                                                                         static_cast<int>(block.size())};
      for (const BlockRow& row : block) {
        index.src_info[l * capacity + static_cast<std::size_t>(count)] = row.token;
        index.src_slot[l * capacity + static_cast<std::size_t>(count)] = row.slot;
        ++count;
      }
    }
  }
  return index;
}

Result<LlExpected> expected_ll(const DispatchPlan& plan, int rank, const RowSource& source) {
  LlExpected expected;
  EPS_ASSIGN_OR_RETURN(expected.index, ll_index(plan, rank));
  const LlIndex& index = expected.index;
  const int num_ranks = plan.num_ranks();
  std::vector<SourceToken> sources(index.src_info.size());
  for (int l = 0; l < plan.num_local_experts(); ++l) {
    for (int r = 0; r < num_ranks; ++r) {
      const LlRange range = index.layout_range[static_cast<std::size_t>(l) * num_ranks + r];
      for (int i = range.begin; i < range.begin + range.count; ++i) {
        const std::size_t row = static_cast<std::size_t>(l) * index.capacity + static_cast<std::size_t>(i);
        sources[row] = {r, index.src_info[row]};
      }
    }
  }
  expected.packed_recv_x.assign(sources.size() * plan.row_bytes(), std::byte{0});
  expected.packed_recv_x_scales.assign(sources.size() * static_cast<std::size_t>(plan.num_scales()), 0.0f);
  detail::fetch_rows(plan, source, sources, expected.packed_recv_x, expected.packed_recv_x_scales);
  return expected;
}

Result<MismatchReport> check_ll_dispatch(const DispatchPlan& plan, int rank, const RowSource& source,
                                         const LlView& actual, LlOrder order) {
  EPS_RETURN_IF_ERROR(detail::check_rank(plan, rank));
  EPS_RETURN_IF_ERROR(check_view(plan, actual));
  const std::vector<std::vector<BlockRow>> blocks = expected_blocks(plan, rank);
  const auto num_ranks = static_cast<std::size_t>(plan.num_ranks());
  MismatchReport report;
  for (int l = 0; l < plan.num_local_experts(); ++l) {
    ExpertChecker checker(plan, rank, l, source, actual, order, report);
    checker.run(std::span(blocks).subspan(static_cast<std::size_t>(l) * num_ranks, num_ranks));
  }
  return report;
}

}  // namespace eps::dispatch
