#include "impls/transport/frame/staging.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace eps::transport {
namespace {

// An array in the device's pinned host memory that grows and never shrinks (its contents are not kept when it
// grows: every use overwrites what it reads back). Views as a span of its current size.
template <typename T>
class PinnedArray {
 public:
  Status resize(device::Device& device, std::size_t count) {
    if (count * sizeof(T) > buffer_.bytes() || !buffer_.data()) {
      buffer_.reset();
      EPS_ASSIGN_OR_RETURN(
          buffer_, device.allocate(std::max<std::size_t>(count * sizeof(T), 64), device::MemoryKind::kHost));
    }
    size_ = count;
    return Status();
  }
  T* data() const { return buffer_.as<T>(); }
  std::size_t size() const { return size_; }
  std::span<T> span() const { return {data(), size_}; }
  operator std::span<T>() const { return span(); }                 // NOLINT: used as the spans it stages
  operator std::span<const T>() const { return {data(), size_}; }  // NOLINT

 private:
  device::Buffer buffer_;
  std::size_t size_ = 0;
};

template <typename T>
Status to_host(device::Device& device, std::span<const T> from, PinnedArray<T>& to) {
  EPS_RETURN_IF_ERROR(to.resize(device, from.size()));
  return from.empty() ? Status() : device.copy(to.data(), from.data(), from.size_bytes());
}

// Elements [first, first + count) of the staged `from` to device span `to`.
template <typename T>
Status to_device(device::Device& device, const PinnedArray<T>& from, std::span<T> to, std::size_t first,
                 std::size_t count) {
  if (count == 0) return Status();
  return device.copy(to.data() + first, from.data() + first, count * sizeof(T));
}

// The rows a dispatch wrote, per layout: HT rows [0, num_rows); LL each expert's rows [l * C, l * C + count).
std::vector<std::pair<std::size_t, std::size_t>> written_rows(Layout kind, const TransportConfig& config,
                                                              int num_ranks, std::int64_t num_rows,
                                                              std::span<const int> packed_recv_count) {
  if (kind != Layout::kLl) return {{0, static_cast<std::size_t>(num_rows)}};
  const auto capacity =
      static_cast<std::size_t>(num_ranks) * static_cast<std::size_t>(config.max_tokens_per_rank);
  const auto local = static_cast<std::size_t>(config.num_experts / num_ranks);
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (std::size_t l = 0; l < local; ++l)
    ranges.emplace_back(l * capacity, static_cast<std::size_t>(packed_recv_count[l]));
  return ranges;
}

}  // namespace

struct HostStaging::Arrays {
  PinnedArray<std::byte> x;
  PinnedArray<float> x_scales;
  PinnedArray<int> topk_idx;
  PinnedArray<float> topk_weights;
  PinnedArray<std::byte> recv_x;
  PinnedArray<float> recv_x_scales, recv_topk_weights, recv_weights;
  PinnedArray<int> recv_topk_idx, num_recv_tokens_per_expert, packed_recv_count, src_info;
  PinnedArray<LlRange> layout_range;
  PinnedArray<bf16> combine_x, bias0, bias1, out;
  PinnedArray<float> combined_weights;
};

HostStaging::HostStaging(device::Device& device, const TransportConfig& config, int num_ranks, Staged staged)
    : device_(device),
      config_(config),
      tokens_(staged == Staged::kAll),
      num_ranks_(num_ranks),
      arrays_(std::make_unique<Arrays>()) {}

HostStaging::~HostStaging() = default;

Result<DispatchInput> HostStaging::dispatch_input(const DispatchInput& in, bool with_routing) {
  Arrays& s = *arrays_;
  DispatchInput staged = in;
  if (tokens_) {
    EPS_RETURN_IF_ERROR(to_host(device_, in.x, s.x));
    EPS_RETURN_IF_ERROR(to_host(device_, in.x_scales, s.x_scales));
    staged.x = s.x;
    staged.x_scales = s.x_scales;
  }
  staged.topk_idx = {};
  staged.topk_weights = {};
  if (!with_routing) return staged;
  EPS_RETURN_IF_ERROR(to_host(device_, in.topk_idx, s.topk_idx));
  EPS_RETURN_IF_ERROR(to_host(device_, in.topk_weights, s.topk_weights));
  staged.topk_idx = s.topk_idx;
  staged.topk_weights = s.topk_weights;
  return staged;
}

Result<DispatchOutput> HostStaging::dispatch_output(const DispatchOutput& out) {
  Arrays& s = *arrays_;
  EPS_RETURN_IF_ERROR(s.recv_x.resize(device_, tokens_ ? out.recv_x.size() : 0));
  EPS_RETURN_IF_ERROR(s.recv_x_scales.resize(device_, tokens_ ? out.recv_x_scales.size() : 0));
  EPS_RETURN_IF_ERROR(s.recv_topk_idx.resize(device_, out.recv_topk_idx.size()));
  EPS_RETURN_IF_ERROR(s.recv_topk_weights.resize(device_, out.recv_topk_weights.size()));
  EPS_RETURN_IF_ERROR(s.recv_weights.resize(device_, out.recv_weights.size()));
  EPS_RETURN_IF_ERROR(s.num_recv_tokens_per_expert.resize(device_, out.num_recv_tokens_per_expert.size()));
  EPS_RETURN_IF_ERROR(s.packed_recv_count.resize(device_, out.packed_recv_count.size()));
  EPS_RETURN_IF_ERROR(s.src_info.resize(device_, out.src_info.size()));
  EPS_RETURN_IF_ERROR(s.layout_range.resize(device_, out.layout_range.size()));
  return DispatchOutput{tokens_ ? std::span<std::byte>(s.recv_x) : out.recv_x,
                        tokens_ ? std::span<float>(s.recv_x_scales) : out.recv_x_scales,
                        s.recv_topk_idx,
                        s.recv_topk_weights,
                        s.recv_weights,
                        s.num_recv_tokens_per_expert,
                        s.packed_recv_count,
                        s.src_info,
                        s.layout_range};
}

Status HostStaging::copy_back_dispatch(Layout layout, std::int64_t num_rows, const DispatchOutput& out) {
  Arrays& s = *arrays_;
  const std::size_t row_bytes = dispatch::payload_row_bytes(config_.dtype, config_.hidden);
  const auto scales = static_cast<std::size_t>(dispatch::payload_num_scales(config_.dtype, config_.hidden));
  const auto k = static_cast<std::size_t>(config_.top_k);
  for (const auto& [first, rows] : written_rows(layout, config_, num_ranks_, num_rows, s.packed_recv_count)) {
    if (tokens_) {
      EPS_RETURN_IF_ERROR(to_device(device_, s.recv_x, out.recv_x, first * row_bytes, rows * row_bytes));
      EPS_RETURN_IF_ERROR(
          to_device(device_, s.recv_x_scales, out.recv_x_scales, first * scales, rows * scales));
    }
    if (layout == Layout::kHtRankMajor) {
      EPS_RETURN_IF_ERROR(to_device(device_, s.recv_topk_idx, out.recv_topk_idx, first * k, rows * k));
      EPS_RETURN_IF_ERROR(
          to_device(device_, s.recv_topk_weights, out.recv_topk_weights, first * k, rows * k));
    } else if (layout == Layout::kHtExpertMajor) {
      EPS_RETURN_IF_ERROR(to_device(device_, s.recv_weights, out.recv_weights, first, rows));
    } else {
      EPS_RETURN_IF_ERROR(to_device(device_, s.src_info, out.src_info, first, rows));
    }
  }
  const auto local = static_cast<std::size_t>(config_.num_experts / num_ranks_);
  if (layout == Layout::kLl) {
    EPS_RETURN_IF_ERROR(to_device(device_, s.packed_recv_count, out.packed_recv_count, 0, local));
    return to_device(device_, s.layout_range, out.layout_range, 0,
                     local * static_cast<std::size_t>(num_ranks_));
  }
  return to_device(device_, s.num_recv_tokens_per_expert, out.num_recv_tokens_per_expert, 0, local);
}

Result<CombineInput> HostStaging::combine_input(const CombineInput& in) {
  if (!tokens_) return in;
  Arrays& s = *arrays_;
  EPS_RETURN_IF_ERROR(to_host(device_, in.x, s.combine_x));
  EPS_RETURN_IF_ERROR(to_host(device_, in.bias0, s.bias0));
  EPS_RETURN_IF_ERROR(to_host(device_, in.bias1, s.bias1));
  return CombineInput{in.tree, s.combine_x, s.bias0, s.bias1};
}

Result<CombineOutput> HostStaging::combine_output(const CombineOutput& out) {
  Arrays& s = *arrays_;
  EPS_RETURN_IF_ERROR(s.out.resize(device_, tokens_ ? out.out.size() : 0));
  EPS_RETURN_IF_ERROR(s.combined_weights.resize(device_, out.combined_weights.size()));
  return CombineOutput{tokens_ ? std::span<bf16>(s.out) : out.out, s.combined_weights};
}

Status HostStaging::copy_back_combine(const CombineOutput& out) {
  Arrays& s = *arrays_;
  if (tokens_) EPS_RETURN_IF_ERROR(to_device(device_, s.out, out.out, 0, s.out.size()));
  return to_device(device_, s.combined_weights, out.combined_weights, 0, s.combined_weights.size());
}

}  // namespace eps::transport
