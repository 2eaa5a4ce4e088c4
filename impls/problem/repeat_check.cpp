#include "impls/problem/repeat_check.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "reference/dispatch/dispatch_plan.hpp"

namespace eps::problem {
namespace {

template <typename T>
OutputBuffer buffer_of(std::string name, const std::vector<T>& values, std::size_t row_elements) {
  return {std::move(name), std::as_bytes(std::span<const T>(values)),
          std::max<std::size_t>(1, row_elements) * sizeof(T)};
}

}  // namespace

std::vector<OutputBuffer> dispatch_outputs(const DispatchBuffers& b, const ProblemShape& shape) {
  const auto k = static_cast<std::size_t>(shape.top_k);
  return {buffer_of("dispatch recv_x", b.recv_x, dispatch::payload_row_bytes(shape.dtype, shape.hidden)),
          buffer_of("dispatch recv_x_scales", b.recv_x_scales,
                    static_cast<std::size_t>(dispatch::payload_num_scales(shape.dtype, shape.hidden))),
          buffer_of("dispatch recv_topk_idx", b.recv_topk_idx, k),
          buffer_of("dispatch recv_topk_weights", b.recv_topk_weights, k),
          buffer_of("dispatch recv_weights", b.recv_weights, 1),
          buffer_of("dispatch num_recv_tokens_per_expert", b.num_recv_tokens_per_expert, 1),
          buffer_of("dispatch packed_recv_count", b.packed_recv_count, 1),
          buffer_of("dispatch src_info", b.src_info, 1),
          buffer_of("dispatch layout_range", b.layout_range, static_cast<std::size_t>(shape.ranks))};
}

std::optional<std::string> first_difference(std::span<const OutputBuffer> first,
                                            std::span<const OutputBuffer> second) {
  if (first.size() != second.size()) {
    return fmt::format("{} output buffers in the first run, {} in the second", first.size(), second.size());
  }
  for (std::size_t i = 0; i < first.size(); ++i) {
    const OutputBuffer& a = first[i];
    const OutputBuffer& b = second[i];
    if (a.name != b.name || a.bytes.size() != b.bytes.size()) {
      return fmt::format("buffer {}: {} ({} bytes) in the first run, {} ({} bytes) in the second", i, a.name,
                         a.bytes.size(), b.name, b.bytes.size());
    }
    const auto [at, other] = std::mismatch(a.bytes.begin(), a.bytes.end(), b.bytes.begin());
    if (at == a.bytes.end()) continue;
    const auto offset = static_cast<std::size_t>(at - a.bytes.begin());
    return fmt::format("{}: row {}, byte {} (offset {}): 0x{:02x} in the first run, 0x{:02x} in the second",
                       a.name, offset / a.row_bytes, offset % a.row_bytes, offset, static_cast<unsigned>(*at),
                       static_cast<unsigned>(*other));
  }
  return std::nullopt;
}

}  // namespace eps::problem
