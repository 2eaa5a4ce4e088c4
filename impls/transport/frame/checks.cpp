#include "impls/transport/frame/checks.hpp"

#include <cmath>

#include <fmt/format.h>

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

Status check_cached_dispatch(const TransportConfig& config, int num_ranks, Layout layout, int handle_tokens,
                             const DispatchInput& in, const DispatchOutput& out) {
  if (in.num_tokens != handle_tokens) {
    return invalid_argument("num_tokens", "a cached dispatch must pass the handle's {} tokens, got {}",
                            handle_tokens, in.num_tokens);
  }
  EPS_RETURN_IF_ERROR(check_dispatch_input(config, in, false));
  return check_dispatch_output(config, num_ranks, layout, out);
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

}  // namespace eps::transport
