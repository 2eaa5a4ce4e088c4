#include "impls/transport/transport_common.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "impls/device/cpu/cpu_device.hpp"

namespace eps::transport {

// docs/dispatch.md 5.8: bf16 rows in, fp8 on the wire; the transport makes the scales.
Status check_quantize_input(const TransportConfig& config, const DispatchInput& in) {
  const Fp8ScaleMode mode = *in.quantize;
  if (mode != Fp8ScaleMode::kAmax && mode != Fp8ScaleMode::kRoundScale) {
    return invalid_argument("quantize", "must be amax or round-scale (docs/numerics.md 1.2), got {}",
                            static_cast<int>(mode));
  }
  if (config.dtype != PayloadType::kFp8) {
    return invalid_argument("quantize", "needs dtype fp8 (it quantizes bf16 rows to fp8), got dtype {}",
                            dtype_name(config.dtype));
  }
  if (!in.x_scales.empty()) {
    return invalid_argument("x_scales",
                            "must be empty when quantize is set (the dispatch makes them), got {}",
                            in.x_scales.size());
  }
  const std::size_t bf16_bytes = static_cast<std::size_t>(in.num_tokens) * 2 * config.hidden;
  if (in.x.size() != bf16_bytes) {
    return invalid_argument("x", "must hold {} bytes (T_r x 2H: bf16 rows to quantize), got {}", bf16_bytes,
                            in.x.size());
  }
  return Status();
}

namespace {

// x and x_scales of T_r rows of the configured dtype.
Status check_payload_sizes(const TransportConfig& config, const DispatchInput& in) {
  const auto tokens = static_cast<std::size_t>(in.num_tokens);
  const std::size_t row_bytes = dispatch::payload_row_bytes(config.dtype, config.hidden);
  const auto num_scales = static_cast<std::size_t>(dispatch::payload_num_scales(config.dtype, config.hidden));
  if (in.x.size() != tokens * row_bytes) {
    return invalid_argument("x", "must hold {} bytes (T_r x row bytes), got {}", tokens * row_bytes,
                            in.x.size());
  }
  if (in.x_scales.size() != tokens * num_scales) {
    return invalid_argument("x_scales", "must hold {} values, got {}", tokens * num_scales,
                            in.x_scales.size());
  }
  return Status();
}

}  // namespace

Status check_dispatch_input(const TransportConfig& config, const DispatchInput& in, bool need_routing) {
  const int t_max = config.max_tokens_per_rank;
  if (in.num_tokens < 0 || in.num_tokens > t_max) {
    return invalid_argument("num_tokens", "must be in [0, {}] (T_max, docs/dispatch.md 5.4), got {}", t_max,
                            in.num_tokens);
  }
  EPS_RETURN_IF_ERROR(in.quantize ? check_quantize_input(config, in) : check_payload_sizes(config, in));
  if (!need_routing) return Status();
  const auto tokens = static_cast<std::size_t>(in.num_tokens);
  const std::size_t slots = tokens * static_cast<std::size_t>(config.top_k);
  if (in.topk_idx.size() != slots || in.topk_weights.size() != slots) {
    return invalid_argument("topk_idx",
                            "topk_idx and topk_weights must hold T_r x K = {} values, got {} and {}", slots,
                            in.topk_idx.size(), in.topk_weights.size());
  }
  for (std::size_t i = 0; i < slots; ++i) {
    if (in.topk_idx[i] < -1 || in.topk_idx[i] >= config.num_experts) {
      return invalid_argument("topk_idx", "entry {} must be in [-1, {}], got {}", i, config.num_experts - 1,
                              in.topk_idx[i]);
    }
  }
  return check_token_routing(config.top_k, in);
}

// docs/errors.md 10: a valid slot's weight must not be NaN, and no token may name one expert twice (the
// layouts of docs/dispatch.md 5 count a token once per expert).
Status check_token_routing(int top_k, const DispatchInput& in) {
  const auto k_max = static_cast<std::size_t>(top_k);
  for (std::size_t t = 0; t < static_cast<std::size_t>(in.num_tokens); ++t) {
    const std::size_t row = t * k_max;
    for (std::size_t k = 0; k < k_max; ++k) {
      const int e = in.topk_idx[row + k];
      if (e < 0) continue;
      if (std::isnan(in.topk_weights[row + k])) {
        return invalid_argument("topk_weights", "entry {} (token {}, slot {}) must not be NaN", row + k, t,
                                k);
      }
      for (std::size_t j = 0; j < k; ++j) {
        if (in.topk_idx[row + j] == e) {
          return invalid_argument("topk_idx",
                                  "token {} names expert {} in slots {} and {}; each expert at most once", t,
                                  e, j, k);
        }
      }
    }
  }
  return Status();
}

Status check_dispatch_output(const TransportConfig& config, int num_ranks, Layout layout,
                             const DispatchOutput& out) {
  const auto rows = static_cast<std::size_t>(recv_capacity_rows(layout, config, num_ranks));
  const auto local = static_cast<std::size_t>(config.num_experts / num_ranks);
  const auto k = static_cast<std::size_t>(config.top_k);
  const std::size_t row_bytes = dispatch::payload_row_bytes(config.dtype, config.hidden);
  const auto num_scales = static_cast<std::size_t>(dispatch::payload_num_scales(config.dtype, config.hidden));
  auto need = [](std::string_view field, std::size_t want, std::size_t got) -> Status {
    if (got < want) return invalid_argument(field, "must hold at least {} elements, got {}", want, got);
    return Status();
  };
  EPS_RETURN_IF_ERROR(need("recv_x", rows * row_bytes, out.recv_x.size()));
  EPS_RETURN_IF_ERROR(need("recv_x_scales", rows * num_scales, out.recv_x_scales.size()));
  switch (layout) {
    case Layout::kHtRankMajor:
      EPS_RETURN_IF_ERROR(need("recv_topk_idx", rows * k, out.recv_topk_idx.size()));
      EPS_RETURN_IF_ERROR(need("recv_topk_weights", rows * k, out.recv_topk_weights.size()));
      return need("num_recv_tokens_per_expert", local, out.num_recv_tokens_per_expert.size());
    case Layout::kHtExpertMajor:
      EPS_RETURN_IF_ERROR(need("recv_weights", rows, out.recv_weights.size()));
      return need("num_recv_tokens_per_expert", local, out.num_recv_tokens_per_expert.size());
    case Layout::kLl:
      EPS_RETURN_IF_ERROR(need("packed_recv_count", local, out.packed_recv_count.size()));
      EPS_RETURN_IF_ERROR(need("src_info", rows, out.src_info.size()));
      return need("layout_range", local * static_cast<std::size_t>(num_ranks), out.layout_range.size());
  }
  return Status();
}

Status check_combine_args(const TransportConfig& config, int num_ranks, const DispatchHandle& handle,
                          int num_tokens, const CombineInput& in, const CombineOutput& out) {
  const Layout kind = handle.layout_kind();
  const bool ht_tree = in.tree != CombineTree::kLlWeighted;
  if (ht_tree != (kind == Layout::kHtRankMajor)) {
    return invalid_argument("tree", "{} cannot combine a {} dispatch", combine_tree_name(in.tree),
                            layout_name(kind));
  }
  const auto hidden = static_cast<std::size_t>(config.hidden);
  const auto tokens = static_cast<std::size_t>(num_tokens);
  const std::size_t rows = kind == Layout::kLl
                               ? static_cast<std::size_t>(recv_capacity_rows(Layout::kLl, config, num_ranks))
                               : static_cast<std::size_t>(handle.num_recv_rows());
  if (in.x.size() < rows * hidden) {
    return invalid_argument("x", "must hold at least {} bf16 values (rows x H), got {}", rows * hidden,
                            in.x.size());
  }
  for (auto [field, bias] : {std::pair{"bias0", in.bias0}, std::pair{"bias1", in.bias1}}) {
    if (!bias.empty() && (!ht_tree || bias.size() != tokens * hidden)) {
      return invalid_argument(field, "must be empty or hold T_r x H = {} values on an ht tree, got {}",
                              tokens * hidden, bias.size());
    }
  }
  if (out.out.size() != tokens * hidden) {
    return invalid_argument("out", "must hold T_r x H = {} values, got {}", tokens * hidden, out.out.size());
  }
  const std::size_t slots = tokens * static_cast<std::size_t>(config.top_k);
  if (!out.combined_weights.empty() && out.combined_weights.size() != slots) {
    return invalid_argument("combined_weights", "must be empty or hold T_r x K = {} values, got {}", slots,
                            out.combined_weights.size());
  }
  return Status();
}

dispatch::DispatchLayout local_layout(const TransportConfig& config, int num_ranks, int rank, int num_tokens,
                                      std::span<const int> topk_idx) {
  const int local = config.num_experts / num_ranks;
  dispatch::DispatchLayout l;
  l.rank = rank;
  l.num_tokens_per_rank.assign(static_cast<std::size_t>(num_ranks), 0);
  l.num_tokens_per_expert.assign(static_cast<std::size_t>(config.num_experts), 0);
  l.is_token_in_rank.assign(static_cast<std::size_t>(num_tokens) * num_ranks, 0);
  for (int t = 0; t < num_tokens; ++t) {
    for (int k = 0; k < config.top_k; ++k) {
      const int e = topk_idx[static_cast<std::size_t>(t) * config.top_k + k];
      if (e < 0) continue;
      ++l.num_tokens_per_expert[static_cast<std::size_t>(e)];
      std::uint8_t& in_rank = l.is_token_in_rank[static_cast<std::size_t>(t) * num_ranks + e / local];
      if (in_rank == 0) ++l.num_tokens_per_rank[static_cast<std::size_t>(e / local)];
      in_rank = 1;
    }
  }
  return l;
}

void start_dispatch(RoutedHandle& h, Layout layout, const void* owner, const TransportConfig& config,
                    int num_ranks, int rank, const DispatchInput& in) {
  h.kind = layout;
  h.owner = owner;
  h.num_tokens = in.num_tokens;
  h.topk_idx.assign(in.topk_idx.begin(), in.topk_idx.end());
  h.topk_weights.assign(in.topk_weights.begin(), in.topk_weights.end());
  h.layout_info = local_layout(config, num_ranks, rank, h.num_tokens, h.topk_idx);
  const int k_max = config.top_k;
  const int local = config.num_experts / num_ranks;
  const bool rank_major = layout == Layout::kHtRankMajor;
  std::vector<std::vector<std::pair<int, int>>> buckets(
      static_cast<std::size_t>(rank_major ? num_ranks : config.num_experts));
  std::vector<int> marked(static_cast<std::size_t>(num_ranks), -1);
  for (int t = 0; t < h.num_tokens; ++t) {
    for (int k = 0; k < k_max; ++k) {
      const int e = h.topk_idx[static_cast<std::size_t>(t) * k_max + k];
      if (e < 0) continue;
      const int q = e / local;
      if (!rank_major) {
        buckets[static_cast<std::size_t>(e)].emplace_back(t, k);
      } else if (marked[static_cast<std::size_t>(q)] != t) {
        marked[static_cast<std::size_t>(q)] = t;
        buckets[static_cast<std::size_t>(q)].emplace_back(t, -1);
      }
    }
  }
  h.send_token.clear();
  h.send_slot.clear();
  h.key_begin.assign(1, 0);
  for (const auto& bucket : buckets) {
    for (const auto& [t, k] : bucket) {
      h.send_token.push_back(t);
      h.send_slot.push_back(k);
    }
    h.key_begin.push_back(static_cast<int>(h.send_token.size()));
  }
  h.send_rows.assign(h.send_token.begin(), h.send_token.end());
}

Status check_cached_dispatch(const TransportConfig& config, int num_ranks, const RoutedHandle& h,
                             const DispatchInput& in, const DispatchOutput& out) {
  if (in.num_tokens != h.num_tokens) {
    return invalid_argument("num_tokens", "a cached dispatch must pass the handle's {} tokens, got {}",
                            h.num_tokens, in.num_tokens);
  }
  EPS_RETURN_IF_ERROR(check_dispatch_input(config, in, false));
  return check_dispatch_output(config, num_ranks, h.kind, out);
}

std::vector<int> rank_prefix_matrix(int num_ranks, std::span<const int> all_per_rank) {
  std::vector<int> prefix(all_per_rank.size(), 0);
  for (int i = 0; i < num_ranks; ++i) {
    for (int j = 0; j < num_ranks; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * num_ranks + j;
      prefix[at] = all_per_rank[at] + (i > 0 ? prefix[at - static_cast<std::size_t>(num_ranks)] : 0);
    }
  }
  return prefix;
}

void localize_routing(const TransportConfig& config, int num_ranks, int rank, const std::int32_t* topk_idx,
                      const float* topk_weights, int* recv_topk_idx, float* recv_topk_weights) {
  const int local = config.num_experts / num_ranks;
  for (int k = 0; k < config.top_k; ++k) {
    const int e = topk_idx[k];
    const bool here = e >= 0 && e / local == rank;
    recv_topk_idx[k] = here ? e % local : -1;
    recv_topk_weights[k] = here ? topk_weights[k] : 0.0f;
  }
}

void count_rank_major(const TransportConfig& config, int num_ranks, std::int64_t rows,
                      const DispatchOutput& out) {
  const int local = config.num_experts / num_ranks;
  const int align = config.expert_alignment;
  std::vector<int> counts(static_cast<std::size_t>(local), 0);
  for (std::size_t row = 0; row < static_cast<std::size_t>(rows); ++row) {
    for (int k = 0; k < config.top_k; ++k) {
      const int l = out.recv_topk_idx[row * config.top_k + k];
      if (l >= 0) ++counts[static_cast<std::size_t>(l)];
    }
  }
  for (int l = 0; l < local; ++l) {
    out.num_recv_tokens_per_expert[static_cast<std::size_t>(l)] =
        (counts[static_cast<std::size_t>(l)] + align - 1) / align * align;
  }
}

Status copy_rows(device::Device& device, std::byte* dst, std::size_t dst_stride, const std::byte* src,
                 std::size_t src_stride, std::size_t row_bytes, std::int64_t rows,
                 std::span<const std::int64_t> src_rows, std::span<const std::int64_t> dst_rows) {
  if (rows == 0 || row_bytes == 0) return Status();
  return device.run(device::CopyRowsArgs{
      dst, src, rows, static_cast<std::int64_t>(row_bytes), static_cast<std::int64_t>(dst_stride),
      static_cast<std::int64_t>(src_stride), dst_rows.empty() ? nullptr : dst_rows.data(),
      src_rows.empty() ? nullptr : src_rows.data()});
}

CombineIndex ll_combine_index(int top_k, int num_tokens, std::span<const int> send_token,
                              std::span<const int> send_slot, std::span<const std::int64_t> record_rows) {
  CombineIndex index;
  index.slot_rows.assign(static_cast<std::size_t>(num_tokens) * top_k, -1);
  for (std::size_t i = 0; i < record_rows.size(); ++i) {
    index
        .slot_rows[static_cast<std::size_t>(send_token[i]) * top_k + static_cast<std::size_t>(send_slot[i])] =
        record_rows[i];
  }
  index.ready = true;
  return index;
}

// docs/dispatch.md 5.5 ht-rank / ht-two-level: each token's records in ascending expert-side rank (the
// records are grouped by rank, so a stable bucketing by token keeps that order).
CombineIndex ht_combine_index(int num_ranks, int num_tokens, std::span<const int> peer_begin,
                              std::span<const int> record_token, std::span<const std::int64_t> record_rows) {
  CombineIndex index;
  index.token_begin.assign(static_cast<std::size_t>(num_tokens) + 1, 0);
  for (int token : record_token) ++index.token_begin[static_cast<std::size_t>(token) + 1];
  for (std::size_t t = 0; t < static_cast<std::size_t>(num_tokens); ++t)
    index.token_begin[t + 1] += index.token_begin[t];
  std::vector<std::int64_t> next(index.token_begin.begin(), index.token_begin.end() - 1);
  index.record_rows.resize(record_token.size());
  index.record_ranks.resize(record_token.size());
  for (int q = 0; q < num_ranks; ++q) {
    for (int i = peer_begin[static_cast<std::size_t>(q)]; i < peer_begin[static_cast<std::size_t>(q) + 1];
         ++i) {
      const std::int64_t at = next[static_cast<std::size_t>(record_token[static_cast<std::size_t>(i)])]++;
      index.record_rows[static_cast<std::size_t>(at)] = record_rows[static_cast<std::size_t>(i)];
      index.record_ranks[static_cast<std::size_t>(at)] = q;
    }
  }
  index.ready = true;
  return index;
}

Status reduce_ht(device::Device& device, const TransportConfig& config, int num_ranks, int num_tokens,
                 CombineTree tree, std::span<const int> peer_begin, std::span<const int> record_token,
                 const bf16* rows, std::span<const std::int64_t> record_rows, std::span<const bf16> bias0,
                 std::span<const bf16> bias1, std::span<bf16> out) {
  if (num_tokens == 0) return Status();
  const CombineIndex index = ht_combine_index(num_ranks, num_tokens, peer_begin, record_token, record_rows);
  return reduce_ht(device, config, num_tokens, tree, index, rows, bias0, bias1, out);
}

Status reduce_ht(device::Device& device, const TransportConfig& config, int num_tokens, CombineTree tree,
                 const CombineIndex& index, const bf16* rows, std::span<const bf16> bias0,
                 std::span<const bf16> bias1, std::span<bf16> out) {
  if (num_tokens == 0) return Status();
  device::CombineHtArgs args;
  args.out = out.data();
  args.tokens = num_tokens;
  args.hidden = config.hidden;
  args.ranks_per_node = tree == CombineTree::kHtTwoLevel ? config.ranks_per_node : 0;
  args.token_begin = index.token_begin.data();
  args.record_rows = index.record_rows.data();
  args.record_ranks = index.record_ranks.data();
  args.rows = rows;
  args.row_stride = config.hidden;
  args.bias0 = bias0.empty() ? nullptr : bias0.data();
  args.bias1 = bias1.empty() ? nullptr : bias1.data();
  EPS_RETURN_IF_ERROR(device.run(args));
  return device.synchronize();  // the caller's index may die on return
}

// docs/dispatch.md 5.5 ll-weighted: per token, valid slots in ascending k.
Status reduce_ll(device::Device& device, const TransportConfig& config, int num_tokens,
                 std::span<const float> topk_weights, const bf16* rows,
                 std::span<const std::int64_t> slot_rows, std::span<bf16> out) {
  if (num_tokens == 0) return Status();
  EPS_RETURN_IF_ERROR(
      device.run(device::CombineLlArgs{out.data(), num_tokens, config.hidden, config.top_k,
                                       topk_weights.data(), slot_rows.data(), rows, config.hidden}));
  return device.synchronize();
}

Status reduce_ll(device::Device& device, const TransportConfig& config, int num_tokens,
                 std::span<const float> topk_weights, const bf16* rows, const CombineIndex& index,
                 std::span<bf16> out) {
  return reduce_ll(device, config, num_tokens, topk_weights, rows, index.slot_rows, out);
}

void write_combined_weights(std::span<const int> topk_idx, std::span<const float> topk_weights,
                            std::span<float> out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = topk_idx[i] >= 0 ? topk_weights[i] : 0.0f;
}

RoutedTransport::RoutedTransport(const TransportConfig& config, Capabilities caps, int rank, int size)
    : config_(config), caps_(std::move(caps)), rank_(rank), size_(size) {
  if (config.device != nullptr && config.device->host_accessible()) {
    kernels_ = config.device;
  } else {
    own_device_ = value_or_throw(device::make_cpu_device());
    kernels_ = own_device_.get();
  }
  staging_ =
      config.memory == MemoryKind::kDevice && config.device != nullptr && !config.device->host_accessible();
}

Result<std::unique_ptr<DispatchHandle>> RoutedTransport::dispatch(Layout layout, const DispatchInput& in,
                                                                  const DispatchOutput& out) {
  if (!caps_.supports(layout)) {
    std::vector<std::string_view> declared;
    for (Layout l : caps_.layouts) declared.push_back(layout_name(l));
    return invalid_argument("layout", "{} declares no {} dispatch (declared: {})", name(),
                            layout_name(layout), fmt::join(declared, ", "));
  }
  if (staging_) return staged_dispatch(layout, in, out);
  return direct_dispatch(layout, in, out);
}

Result<std::unique_ptr<DispatchHandle>> RoutedTransport::direct_dispatch(Layout layout,
                                                                         const DispatchInput& in,
                                                                         const DispatchOutput& out) {
  EPS_RETURN_IF_ERROR(check_dispatch_input(config_, in, true));
  EPS_RETURN_IF_ERROR(check_dispatch_output(config_, size_, layout, out));
  std::unique_ptr<RoutedHandle> h = make_handle();
  start_dispatch(*h, layout, this, config_, size_, rank_, in);
  EPS_ASSIGN_OR_RETURN(const DispatchInput payload, backend_input(in));
  EPS_RETURN_IF_ERROR(run_dispatch(*h, payload, out));
  return std::unique_ptr<DispatchHandle>(std::move(h));
}

Status RoutedTransport::dispatch_cached(const DispatchHandle& handle, const DispatchInput& in,
                                        const DispatchOutput& out) {
  EPS_ASSIGN_OR_RETURN(const RoutedHandle* h, owned_handle<RoutedHandle>(handle, this, name()));
  if (staging_) return staged_dispatch_cached(*h, in, out);
  EPS_RETURN_IF_ERROR(check_cached_dispatch(config_, size_, *h, in, out));
  EPS_ASSIGN_OR_RETURN(const DispatchInput payload, backend_input(in));
  return run_cached_dispatch(*h, payload, out);
}

namespace {

// At least `bytes` (never 0) of kernels memory in `buffer`, which grows and never shrinks.
Status reserve(device::Device& device, device::Buffer& buffer, std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 64);
  if (buffer.data() != nullptr && buffer.bytes() >= bytes) return Status();
  buffer.reset();
  EPS_ASSIGN_OR_RETURN(buffer, device.allocate(bytes, MemoryKind::kDevice));
  return Status();
}

}  // namespace

// docs/dispatch.md 5.8 for a backend that does not fuse it: the same quantizer kernel, run before the pack.
Result<DispatchInput> RoutedTransport::backend_input(const DispatchInput& in) {
  if (!in.quantize || fuses_quantize()) return in;
  const auto hidden = static_cast<std::size_t>(config_.hidden);
  const std::size_t scale_bytes = 4 * hidden / kFp8GroupSize;
  const auto t_max = static_cast<std::size_t>(config_.max_tokens_per_rank);
  EPS_RETURN_IF_ERROR(reserve(kernels(), quantized_codes_, t_max * hidden));
  EPS_RETURN_IF_ERROR(reserve(kernels(), quantized_scales_, t_max * scale_bytes));
  const auto tokens = static_cast<std::size_t>(in.num_tokens);
  if (tokens > 0) {
    EPS_RETURN_IF_ERROR(kernels().run(device::Fp8QuantizeArgs{
        reinterpret_cast<const bf16*>(in.x.data()), config_.hidden, nullptr,
        quantized_codes_.as<std::uint8_t>(), config_.hidden, quantized_scales_.as<std::byte>(),
        static_cast<std::int64_t>(scale_bytes), in.num_tokens, config_.hidden, *in.quantize}));
    EPS_RETURN_IF_ERROR(kernels().synchronize());
  }
  DispatchInput codes = in;
  codes.x = {quantized_codes_.as<const std::byte>(), tokens * hidden};
  codes.x_scales = {quantized_scales_.as<const float>(), tokens * scale_bytes / 4};
  codes.quantize.reset();
  return codes;
}

Status RoutedTransport::combine(const DispatchHandle& handle, const CombineInput& in,
                                const CombineOutput& out) {
  EPS_ASSIGN_OR_RETURN(const RoutedHandle* h, owned_handle<RoutedHandle>(handle, this, name()));
  if (staging_) return staged_combine(*h, in, out);
  return direct_combine(*h, in, out);
}

Status RoutedTransport::direct_combine(const RoutedHandle& h, const CombineInput& in,
                                       const CombineOutput& out) {
  EPS_RETURN_IF_ERROR(check_combine_args(config_, size_, h, h.num_tokens, in, out));
  EPS_RETURN_IF_ERROR(run_combine(h, in, out));
  write_combined_weights(h.topk_idx, h.topk_weights, out.combined_weights);
  return Status();
}

}  // namespace eps::transport
