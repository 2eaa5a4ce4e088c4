#include "impls/transport/data_path/data_path.hpp"

#include <algorithm>
#include <cstring>

#include "impls/device/cpu/cpu_device.hpp"
#include "impls/transport/routing/routing.hpp"

namespace eps::transport {
namespace {

// At least `bytes` (never 0) of the device's memory in `buffer`, which grows and never shrinks.
Status reserve(device::Device& device, device::Buffer& buffer, std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 64);
  if (buffer.data() != nullptr && buffer.bytes() >= bytes) return Status();
  buffer.reset();
  EPS_ASSIGN_OR_RETURN(buffer, device.allocate(bytes, MemoryKind::kDevice));
  return Status();
}

}  // namespace

// The records' headers alone, one after the other (the host's side of resident() header copies).
RecordFormat headers_only(const RecordFormat& format) {
  RecordFormat packed = format;
  packed.stride = format.header_bytes;
  return packed;
}

DataPath::DataPath(const TransportConfig& config, int rank, int num_ranks, bool device_resident)
    : config_(config), rank_(rank), num_ranks_(num_ranks) {
  resident_ = device_resident && config.memory == MemoryKind::kDevice && config.device != nullptr &&
              !config.device->host_accessible();
  if (config.device != nullptr && (config.device->host_accessible() || resident_)) {
    device_ = config.device;
  } else {
    own_device_ = value_or_throw(device::make_cpu_device());
    device_ = own_device_.get();
  }
}

Status DataPath::read_device(void* host, const void* device_memory, std::size_t bytes) {
  if (bytes == 0) return Status();
  if (!resident_) {
    std::memcpy(host, device_memory, bytes);
    return Status();
  }
  return device_->copy(host, device_memory, bytes);
}

Status DataPath::write_device(void* device_memory, const void* host, std::size_t bytes) {
  if (bytes == 0) return Status();
  if (!resident_) {
    std::memcpy(device_memory, host, bytes);
    return Status();
  }
  return device_->copy(device_memory, host, bytes);
}

Status DataPath::finish() {
  EPS_RETURN_IF_ERROR(device_->synchronize());
  uploads_.clear();
  return Status();
}

template <typename T>
Result<const T*> DataPath::kernel_index(std::span<const T> host) {
  if (host.empty()) return static_cast<const T*>(nullptr);
  if (!resident_) return host.data();
  EPS_ASSIGN_OR_RETURN(device::Buffer copy, device_->allocate(host.size_bytes(), MemoryKind::kDevice));
  EPS_RETURN_IF_ERROR(device_->copy(copy.data(), host.data(), host.size_bytes()));
  uploads_.push_back(std::move(copy));
  return uploads_.back().as<const T>();
}

Status DataPath::copy_rows(std::byte* dst, std::size_t dst_stride, const std::byte* src,
                           std::size_t src_stride, std::size_t row_bytes, std::int64_t rows,
                           std::span<const std::int64_t> src_rows, std::span<const std::int64_t> dst_rows) {
  if (rows == 0 || row_bytes == 0) return Status();
  EPS_ASSIGN_OR_RETURN(const std::int64_t* dst_list, kernel_index(dst_rows));
  EPS_ASSIGN_OR_RETURN(const std::int64_t* src_list, kernel_index(src_rows));
  return device_->run(device::CopyRowsArgs{dst, src, rows, static_cast<std::int64_t>(row_bytes),
                                           static_cast<std::int64_t>(dst_stride),
                                           static_cast<std::int64_t>(src_stride), dst_list, src_list});
}

Status DataPath::write_record_headers(const RecordFormat& format, const SendPlan& plan, int first, int last,
                                      std::byte* dst) {
  if (!resident_) {
    write_headers(format, plan, first, last, dst);
    return Status();
  }
  const RecordFormat packed = headers_only(format);
  headers_.resize(static_cast<std::size_t>(last - first) * packed.stride);
  write_headers(packed, plan, first, last, headers_.data());
  EPS_ASSIGN_OR_RETURN(const std::byte* headers, kernel_index(std::span<const std::byte>(headers_)));
  return copy_rows(dst, format.stride, headers, packed.stride, packed.stride, last - first, {});
}

Result<const std::byte*> DataPath::headers_on_host(const RecordFormat& format, const std::byte* records,
                                                   std::int64_t n) {
  if (!resident_) return records;
  const std::size_t bytes = static_cast<std::size_t>(n) * format.header_bytes;
  EPS_ASSIGN_OR_RETURN(device::Buffer gathered, device_->allocate(bytes, MemoryKind::kDevice));
  EPS_RETURN_IF_ERROR(copy_rows(gathered.as<std::byte>(), format.header_bytes, records, format.stride,
                                format.header_bytes, n, {}));
  headers_.resize(bytes);
  EPS_RETURN_IF_ERROR(device_->copy(headers_.data(), gathered.data(), bytes));
  uploads_.push_back(std::move(gathered));
  return headers_.data();
}

Status DataPath::pack_records(const RecordFormat& format, const SendPlan& plan, const DispatchInput& in,
                              int first, int last, std::byte* dst) {
  if (last <= first) return Status();
  EPS_RETURN_IF_ERROR(write_record_headers(format, plan, first, last, dst));
  if (in.quantize) return Status();
  const auto records = static_cast<std::int64_t>(last - first);
  const std::span<const std::int64_t> rows =
      std::span<const std::int64_t>(plan.record_row)
          .subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(records));
  std::byte* payload = dst + format.header_bytes;
  EPS_RETURN_IF_ERROR(
      copy_rows(payload, format.stride, in.x.data(), format.row_bytes, format.row_bytes, records, rows));
  return copy_rows(payload + format.row_bytes, format.stride,
                   reinterpret_cast<const std::byte*>(in.x_scales.data()), format.scale_bytes,
                   format.scale_bytes, records, rows);
}

// The quantizer kernel gathers each token's bf16 row once and writes its codes and, after them, its scales
// into the token's first record; the row-copy kernel copies those bytes (one run of codes and scales) into
// the token's other records.
Status DataPath::quantize_into_records(const RecordFormat& format, const QuantizePlan& plan,
                                       const DispatchInput& in, const std::array<std::byte*, 2>& areas) {
  const auto stride = static_cast<std::int64_t>(format.stride);
  for (std::size_t a = 0; a < 2; ++a) {
    const std::vector<std::int64_t>& src = plan.quantize_src[a];
    if (src.empty()) continue;
    std::byte* payload = areas[a] + format.header_bytes;
    EPS_ASSIGN_OR_RETURN(const std::int64_t* src_rows, kernel_index(std::span<const std::int64_t>(src)));
    EPS_ASSIGN_OR_RETURN(const std::int64_t* dst_rows,
                         kernel_index(std::span<const std::int64_t>(plan.quantize_dst[a])));
    EPS_RETURN_IF_ERROR(device_->run(device::Fp8QuantizeArgs{
        reinterpret_cast<const bf16*>(in.x.data()), config_.hidden, src_rows,
        reinterpret_cast<std::uint8_t*>(payload), stride, payload + format.row_bytes, stride,
        static_cast<std::int64_t>(src.size()), config_.hidden, *in.quantize, dst_rows}));
  }
  for (std::size_t pair = 0; pair < 4; ++pair) {
    const std::vector<std::int64_t>& src = plan.copy_src[pair];
    EPS_RETURN_IF_ERROR(copy_rows(areas[pair % 2] + format.header_bytes, format.stride,
                                  areas[pair / 2] + format.header_bytes, format.stride,
                                  format.payload_bytes(), static_cast<std::int64_t>(src.size()), src,
                                  plan.copy_dst[pair]));
  }
  return Status();
}

Result<DispatchInput> DataPath::quantized_input(const DispatchInput& in) {
  if (!in.quantize) return in;
  const auto hidden = static_cast<std::size_t>(config_.hidden);
  const std::size_t scale_bytes = 4 * hidden / kFp8GroupSize;
  const auto t_max = static_cast<std::size_t>(config_.max_tokens_per_rank);
  EPS_RETURN_IF_ERROR(reserve(*device_, quantized_codes_, t_max * hidden));
  EPS_RETURN_IF_ERROR(reserve(*device_, quantized_scales_, t_max * scale_bytes));
  const auto tokens = static_cast<std::size_t>(in.num_tokens);
  if (tokens > 0) {
    EPS_RETURN_IF_ERROR(device_->run(device::Fp8QuantizeArgs{
        reinterpret_cast<const bf16*>(in.x.data()), config_.hidden, nullptr,
        quantized_codes_.as<std::uint8_t>(), config_.hidden, quantized_scales_.as<std::byte>(),
        static_cast<std::int64_t>(scale_bytes), in.num_tokens, config_.hidden, *in.quantize}));
    EPS_RETURN_IF_ERROR(finish());
  }
  DispatchInput codes = in;
  codes.x = {quantized_codes_.as<const std::byte>(), tokens * hidden};
  codes.x_scales = {quantized_scales_.as<const float>(), tokens * scale_bytes / 4};
  codes.quantize.reset();
  return codes;
}

// One loop per header kind (this runs once per received record of every dispatch).
void DataPath::read_headers(const RecordFormat& format, const std::byte* records, std::int64_t n,
                            const RowTarget& target, const DispatchOutput& out) const {
  const auto k_max = static_cast<std::size_t>(config_.top_k);
  const std::byte* at = records;
  if (format.layout == Layout::kHtRankMajor) {
    for (std::int64_t i = 0; i < n; ++i, at += format.stride) {
      const auto row = static_cast<std::size_t>(target.row(i));
      std::int32_t idx[dispatch::kMaxTopK];
      float weights[dispatch::kMaxTopK];
      std::memcpy(idx, at + 4, 4 * k_max);
      std::memcpy(weights, at + 4 + 4 * k_max, 4 * k_max);
      localize_routing(config_, num_ranks_, rank_, idx, weights, out.recv_topk_idx.data() + row * k_max,
                       out.recv_topk_weights.data() + row * k_max);
    }
    return;
  }
  // Slot headers: LL keeps the token (src_info), expert-major the weight.
  const bool ll = format.layout == Layout::kLl;
  for (std::int64_t i = 0; i < n; ++i, at += format.stride) {
    const auto row = static_cast<std::size_t>(target.row(i));
    if (ll) {
      std::memcpy(&out.src_info[row], at, 4);
    } else {
      std::memcpy(&out.recv_weights[row], at + 12, 4);
    }
  }
}

Status DataPath::unpack_records(const RecordFormat& format, const std::byte* records, std::int64_t n,
                                const RowTarget& target, const DispatchOutput& out) {
  if (n == 0) return Status();
  EPS_ASSIGN_OR_RETURN(const std::byte* headers, headers_on_host(format, records, n));
  read_headers(resident_ ? headers_only(format) : format, headers, n, target, out);
  const bool listed = !target.rows.empty();
  const std::size_t skip_rows = listed ? 0 : static_cast<std::size_t>(target.first);
  const std::byte* payload = records + format.header_bytes;
  EPS_RETURN_IF_ERROR(copy_rows(out.recv_x.data() + skip_rows * format.row_bytes, format.row_bytes, payload,
                                format.stride, format.row_bytes, n, {}, target.rows));
  return copy_rows(reinterpret_cast<std::byte*>(out.recv_x_scales.data()) + skip_rows * format.scale_bytes,
                   format.scale_bytes, payload + format.row_bytes, format.stride, format.scale_bytes, n, {},
                   target.rows);
}

Status DataPath::zero_rows(const DispatchOutput& out, std::int64_t first, std::int64_t n) {
  if (n == 0) return Status();
  const std::size_t row_bytes = dispatch::payload_row_bytes(config_.dtype, config_.hidden);
  const auto scales = static_cast<std::size_t>(dispatch::payload_num_scales(config_.dtype, config_.hidden));
  const auto begin = static_cast<std::size_t>(first);
  const auto rows = static_cast<std::size_t>(n);
  EPS_RETURN_IF_ERROR(device_->fill(out.recv_x.data() + begin * row_bytes, 0, rows * row_bytes));
  if (scales > 0) {
    EPS_RETURN_IF_ERROR(device_->fill(out.recv_x_scales.data() + begin * scales, 0, rows * scales * 4));
  }
  std::fill_n(out.recv_weights.begin() + static_cast<std::ptrdiff_t>(begin), rows, 0.0f);
  return Status();
}

Status DataPath::reduce(CombineTree tree, const SendPlan& plan, const CombineIndex& index, const bf16* rows,
                        std::span<const bf16> bias0, std::span<const bf16> bias1, std::span<bf16> out) {
  if (plan.num_tokens == 0) return Status();
  if (tree == CombineTree::kLlWeighted) {
    EPS_ASSIGN_OR_RETURN(const float* weights, kernel_index(std::span<const float>(plan.topk_weights)));
    EPS_ASSIGN_OR_RETURN(const std::int64_t* slot_rows,
                         kernel_index(std::span<const std::int64_t>(index.slot_rows)));
    EPS_RETURN_IF_ERROR(
        device_->run(device::CombineLlArgs{out.data(), plan.num_tokens, config_.hidden, config_.top_k,
                                           weights, slot_rows, rows, config_.hidden}));
    return finish();
  }
  device::CombineHtArgs args;
  args.out = out.data();
  args.tokens = plan.num_tokens;
  args.hidden = config_.hidden;
  EPS_ASSIGN_OR_RETURN(args.token_begin, kernel_index(std::span<const std::int64_t>(index.token_begin)));
  EPS_ASSIGN_OR_RETURN(args.record_rows, kernel_index(std::span<const std::int64_t>(index.record_rows)));
  if (tree == CombineTree::kHtTwoLevel) {
    EPS_ASSIGN_OR_RETURN(args.record_nodes, kernel_index(std::span<const std::int32_t>(index.record_nodes)));
  }
  args.rows = rows;
  args.row_stride = config_.hidden;
  args.bias0 = bias0.empty() ? nullptr : bias0.data();
  args.bias1 = bias1.empty() ? nullptr : bias1.data();
  EPS_RETURN_IF_ERROR(device_->run(args));
  return finish();
}

}  // namespace eps::transport
