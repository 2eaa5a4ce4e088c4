#include "impls/transport/data_path/records.hpp"

#include <cstring>

namespace eps::transport {

RecordFormat record_format(Layout layout, const TransportConfig& config, std::size_t alignment) {
  RecordFormat f;
  f.layout = layout;
  f.top_k = config.top_k;
  f.header_bytes =
      layout == Layout::kHtRankMajor ? 4 + 8 * static_cast<std::size_t>(config.top_k) : kSlotHeaderBytes;
  f.row_bytes = dispatch::payload_row_bytes(config.dtype, config.hidden);
  f.scale_bytes = 4 * static_cast<std::size_t>(dispatch::payload_num_scales(config.dtype, config.hidden));
  const std::size_t bytes = f.header_bytes + f.row_bytes + f.scale_bytes;
  f.stride = (bytes + alignment - 1) / alignment * alignment;
  return f;
}

// One loop per header kind (this runs once per record of every dispatch).
void write_headers(const RecordFormat& format, const SendPlan& plan, int first, int last, std::byte* dst) {
  const auto k_max = static_cast<std::size_t>(format.top_k);
  std::byte* at = dst;
  if (format.layout == Layout::kHtRankMajor) {
    for (int i = first; i < last; ++i, at += format.stride) {
      const std::int32_t t = plan.record_token[static_cast<std::size_t>(i)];
      const std::size_t routing = static_cast<std::size_t>(t) * k_max;
      std::memcpy(at, &t, 4);
      std::memcpy(at + 4, plan.topk_idx.data() + routing, 4 * k_max);
      std::memcpy(at + 4 + 4 * k_max, plan.topk_weights.data() + routing, 4 * k_max);
    }
    return;
  }
  for (int i = first; i < last; ++i, at += format.stride) {
    const std::int32_t t = plan.record_token[static_cast<std::size_t>(i)];
    const int k = plan.record_slot[static_cast<std::size_t>(i)];
    const std::size_t slot = static_cast<std::size_t>(t) * k_max + static_cast<std::size_t>(k);
    const std::int32_t header[3] = {t, k, plan.topk_idx[slot]};
    std::memcpy(at, header, 12);
    std::memcpy(at + 12, &plan.topk_weights[slot], 4);
  }
}

QuantizePlan plan_fused_quantize(const SendPlan& plan, int self_first, int self_last) {
  QuantizePlan q;
  const auto area = [&](int i) { return i >= self_first && i < self_last ? 1 : 0; };
  const auto index = [&](int i) { return static_cast<std::int64_t>(area(i) == 1 ? i - self_first : i); };
  std::vector<int> first(static_cast<std::size_t>(plan.num_tokens), -1);
  for (int i = 0; i < plan.records(); ++i) {
    int& f = first[static_cast<std::size_t>(plan.record_token[static_cast<std::size_t>(i)])];
    if (f < 0) {
      f = i;
      q.quantize_src[static_cast<std::size_t>(area(i))].push_back(
          plan.record_row[static_cast<std::size_t>(i)]);
      q.quantize_dst[static_cast<std::size_t>(area(i))].push_back(index(i));
      continue;
    }
    const auto pair = static_cast<std::size_t>(area(f) * 2 + area(i));
    q.copy_src[pair].push_back(index(f));
    q.copy_dst[pair].push_back(index(i));
  }
  q.ready = true;
  return q;
}

}  // namespace eps::transport
