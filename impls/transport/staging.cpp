// Staging of the caller's device buffers through host memory (transport.hpp "Memory", docs/devices.md): when
// the host cannot address config.device's memory, every call copies the inputs to pinned host memory of that
// device (Device::allocate kHost: cudaMallocHost / hipHostMalloc on a GPU, so the copies are DMA), runs the
// backend on them with the transport's own `cpu` device, and copies back exactly the output elements the
// contract says the call writes (rows beyond them stay untouched, docs/dispatch.md 5.7).
#include <algorithm>
#include <vector>

#include "impls/transport/transport_common.hpp"

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

}  // namespace

// Host copies, kept between calls so that their capacity is reused.
struct RoutedTransport::Staging {
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

  // The staged dispatch outputs as the backend writes them.
  DispatchOutput outputs() const {
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
};

namespace {

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

}  // namespace

namespace {

// The rows a dispatch wrote, per layout: HT rows [0, num_rows); LL each expert's rows [l * C, l * C + count).
std::vector<std::pair<std::size_t, std::size_t>> written_rows(Layout kind, const TransportConfig& config,
                                                              int num_ranks, std::int64_t num_rows,
                                                              const std::vector<int>& packed_recv_count) {
  if (kind != Layout::kLl) return {{0, static_cast<std::size_t>(num_rows)}};
  const auto capacity =
      static_cast<std::size_t>(num_ranks) * static_cast<std::size_t>(config.max_tokens_per_rank);
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (std::size_t l = 0; l < packed_recv_count.size(); ++l)
    ranges.emplace_back(l * capacity, static_cast<std::size_t>(packed_recv_count[l]));
  return ranges;
}

}  // namespace

Result<std::unique_ptr<DispatchHandle>> RoutedTransport::staged_dispatch(Layout layout,
                                                                         const DispatchInput& in,
                                                                         const DispatchOutput& out) {
  if (!staged_) staged_ = std::make_shared<Staging>();
  Staging& s = *staged_;
  device::Device& dev = *config_.device;
  EPS_RETURN_IF_ERROR(to_host(dev, in.x, s.x));
  EPS_RETURN_IF_ERROR(to_host(dev, in.x_scales, s.x_scales));
  EPS_RETURN_IF_ERROR(to_host(dev, in.topk_idx, s.topk_idx));
  EPS_RETURN_IF_ERROR(to_host(dev, in.topk_weights, s.topk_weights));
  const DispatchInput host_in{in.num_tokens, s.x, s.x_scales, s.topk_idx, s.topk_weights, in.quantize};
  EPS_RETURN_IF_ERROR(s.recv_x.resize(dev, out.recv_x.size()));
  EPS_RETURN_IF_ERROR(s.recv_x_scales.resize(dev, out.recv_x_scales.size()));
  EPS_RETURN_IF_ERROR(s.recv_topk_idx.resize(dev, out.recv_topk_idx.size()));
  EPS_RETURN_IF_ERROR(s.recv_topk_weights.resize(dev, out.recv_topk_weights.size()));
  EPS_RETURN_IF_ERROR(s.recv_weights.resize(dev, out.recv_weights.size()));
  EPS_RETURN_IF_ERROR(s.num_recv_tokens_per_expert.resize(dev, out.num_recv_tokens_per_expert.size()));
  EPS_RETURN_IF_ERROR(s.packed_recv_count.resize(dev, out.packed_recv_count.size()));
  EPS_RETURN_IF_ERROR(s.src_info.resize(dev, out.src_info.size()));
  EPS_RETURN_IF_ERROR(s.layout_range.resize(dev, out.layout_range.size()));
  const DispatchOutput host_out = s.outputs();
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<DispatchHandle> handle, direct_dispatch(layout, host_in, host_out));
  EPS_RETURN_IF_ERROR(copy_back_dispatch(static_cast<const RoutedHandle&>(*handle), out));
  return handle;
}

Status RoutedTransport::staged_dispatch_cached(const RoutedHandle& h, const DispatchInput& in,
                                               const DispatchOutput& out) {
  Staging& s = *staged_;
  device::Device& dev = *config_.device;
  EPS_RETURN_IF_ERROR(to_host(dev, in.x, s.x));
  EPS_RETURN_IF_ERROR(to_host(dev, in.x_scales, s.x_scales));
  const DispatchInput host_in{in.num_tokens, s.x, s.x_scales, {}, {}, in.quantize};
  const DispatchOutput host_out = s.outputs();
  EPS_RETURN_IF_ERROR(check_cached_dispatch(config_, size_, h, host_in, host_out));
  EPS_ASSIGN_OR_RETURN(const DispatchInput payload, backend_input(host_in));
  EPS_RETURN_IF_ERROR(run_cached_dispatch(h, payload, host_out));
  return copy_back_dispatch(h, out);
}

Status RoutedTransport::copy_back_dispatch(const RoutedHandle& h, const DispatchOutput& out) {
  Staging& s = *staged_;
  device::Device& dev = *config_.device;
  const std::size_t row_bytes = dispatch::payload_row_bytes(config_.dtype, config_.hidden);
  const auto scales = static_cast<std::size_t>(dispatch::payload_num_scales(config_.dtype, config_.hidden));
  const auto k = static_cast<std::size_t>(config_.top_k);
  const std::vector<int> packed(s.packed_recv_count.data(),
                                s.packed_recv_count.data() + s.packed_recv_count.size());
  for (const auto& [first, rows] : written_rows(h.kind, config_, size_, h.num_rows, packed)) {
    EPS_RETURN_IF_ERROR(to_device(dev, s.recv_x, out.recv_x, first * row_bytes, rows * row_bytes));
    EPS_RETURN_IF_ERROR(to_device(dev, s.recv_x_scales, out.recv_x_scales, first * scales, rows * scales));
    if (h.kind == Layout::kHtRankMajor) {
      EPS_RETURN_IF_ERROR(to_device(dev, s.recv_topk_idx, out.recv_topk_idx, first * k, rows * k));
      EPS_RETURN_IF_ERROR(to_device(dev, s.recv_topk_weights, out.recv_topk_weights, first * k, rows * k));
    } else if (h.kind == Layout::kHtExpertMajor) {
      EPS_RETURN_IF_ERROR(to_device(dev, s.recv_weights, out.recv_weights, first, rows));
    } else {
      EPS_RETURN_IF_ERROR(to_device(dev, s.src_info, out.src_info, first, rows));
    }
  }
  const auto local = static_cast<std::size_t>(config_.num_experts / size_);
  if (h.kind == Layout::kLl) {
    EPS_RETURN_IF_ERROR(to_device(dev, s.packed_recv_count, out.packed_recv_count, 0, local));
    return to_device(dev, s.layout_range, out.layout_range, 0, local * static_cast<std::size_t>(size_));
  }
  return to_device(dev, s.num_recv_tokens_per_expert, out.num_recv_tokens_per_expert, 0, local);
}

Status RoutedTransport::staged_combine(const RoutedHandle& h, const CombineInput& in,
                                       const CombineOutput& out) {
  Staging& s = *staged_;
  device::Device& dev = *config_.device;
  EPS_RETURN_IF_ERROR(to_host(dev, in.x, s.combine_x));
  EPS_RETURN_IF_ERROR(to_host(dev, in.bias0, s.bias0));
  EPS_RETURN_IF_ERROR(to_host(dev, in.bias1, s.bias1));
  EPS_RETURN_IF_ERROR(s.out.resize(dev, out.out.size()));
  EPS_RETURN_IF_ERROR(s.combined_weights.resize(dev, out.combined_weights.size()));
  EPS_RETURN_IF_ERROR(
      direct_combine(h, {in.tree, s.combine_x, s.bias0, s.bias1}, {s.out, s.combined_weights}));
  EPS_RETURN_IF_ERROR(to_device(dev, s.out, out.out, 0, s.out.size()));
  return to_device(dev, s.combined_weights, out.combined_weights, 0, s.combined_weights.size());
}

}  // namespace eps::transport
