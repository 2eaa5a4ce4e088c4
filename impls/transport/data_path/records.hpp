// The records a dispatch sends (docs/dispatch.md 5.6): a header, then the payload row, then its fp8 scales,
// `stride` bytes from one record to the next. Headers carry index data only (the token's routing); the
// payload bytes are moved by the data path's kernels (data_path.hpp), never here.
//   rank-major header: token (int32), the token's K expert ids (int32), its K weights (fp32): 4 + 8K bytes
//   slot header:       token, slot k, expert (int32), weight (fp32): 16 bytes (DeepEP's LL message header)
// The slot header serves the expert-major and LL layouts.
//
// QuantizePlan: the fused fp8 pack of docs/dispatch.md 5.8. Every token is quantized once, into its first
// record in send order, whose codes and scales are then copied into the token's other records. Records lie in
// two areas: 0 = a send buffer (record i at index i), 1 = the records [self_first, self_last) that the
// caller writes elsewhere (the direct protocol: this rank's own records, written in place into its receive
// region; index i - self_first).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "impls/transport/routing/routing.hpp"

namespace eps::transport {

inline constexpr std::size_t kSlotHeaderBytes = 16;  // token, slot, expert, weight (docs/dispatch.md 5.6)

struct RecordFormat {
  Layout layout = Layout::kHtRankMajor;  // kHtRankMajor: rank-major headers; else slot headers
  int top_k = 1;
  std::size_t header_bytes = 0;
  std::size_t row_bytes = 0;    // the payload row: 2H (bf16) or H (fp8 codes)
  std::size_t scale_bytes = 0;  // 4 x H/128 (fp8), 0 (bf16)
  std::size_t stride = 0;       // header + row + scales, rounded up to the format's alignment

  std::size_t payload_bytes() const { return row_bytes + scale_bytes; }
};

// The records of `layout` under `config`, each padded to a multiple of `alignment` bytes.
RecordFormat record_format(Layout layout, const TransportConfig& config, std::size_t alignment);

// The headers of records [first, last) of `plan` into consecutive records from `dst`.
void write_headers(const RecordFormat& format, const SendPlan& plan, int first, int last, std::byte* dst);

struct QuantizePlan {
  bool ready = false;
  std::array<std::vector<std::int64_t>, 2> quantize_src;  // [area]: rows of the input, one per token
  std::array<std::vector<std::int64_t>, 2> quantize_dst;  // [area]: the token's first record there
  std::array<std::vector<std::int64_t>, 4> copy_src;      // [from area * 2 + to area]: first records
  std::array<std::vector<std::int64_t>, 4> copy_dst;      // [from area * 2 + to area]: the other records
};

// The fused pack of `plan`'s records, those in [self_first, self_last) in area 1.
QuantizePlan plan_fused_quantize(const SendPlan& plan, int self_first, int self_last);

}  // namespace eps::transport
