#include "reference/data/fill.hpp"

namespace eps::data {
namespace {

constexpr std::uint64_t kTokenLimit = std::uint64_t{1} << 32;

Status check_tokens(std::uint64_t token_begin, std::uint64_t num_tokens) {
  if (token_begin > kTokenLimit || num_tokens > kTokenLimit - token_begin) {
    return invalid_argument("tokens", "token_begin + num_tokens must be <= 2^32, got {} + {}", token_begin,
                            num_tokens);
  }
  return Status();
}

Status check_size(std::size_t got, std::uint64_t rows, std::uint64_t cols) {
  if (got != rows * cols) {
    return invalid_argument("out", "must hold {} x {} = {} elements, got {}", rows, cols, rows * cols, got);
  }
  return Status();
}

Status check_layer(std::uint32_t layer) {
  if (layer > kMaxLayer) return out_of_range<std::uint32_t>("layer", 0, kMaxLayer, layer);
  return Status();
}

// Fills row-major [rows, cols] from stream `address`, one Philox block per four columns; `map` turns the
// 32 random bits of an element into its value. Same bits as stream_bits element by element.
template <typename T, typename Map>
void fill_stream(std::uint64_t seed, StreamAddress address, std::uint64_t row_begin, std::uint64_t rows,
                 std::uint32_t cols, std::span<T> out, Map map) {
  for (std::uint64_t r = 0; r < rows; ++r) {
    const auto row = static_cast<std::uint32_t>(row_begin + r);
    T* dst = out.data() + r * cols;
    for (std::uint32_t c = 0; c < cols; c += 4) {
      const PhiloxBlock block = stream_block(seed, address, row, c);
      const std::uint32_t n = cols - c < 4 ? cols - c : 4;
      for (std::uint32_t j = 0; j < n; ++j) dst[c + j] = map(block.v[j]);
    }
  }
}

}  // namespace

Status fill_payload(std::uint64_t seed, std::uint32_t rank, std::uint64_t token_begin,
                    std::uint64_t num_tokens, std::uint32_t hidden, std::span<bf16> out) {
  EPS_RETURN_IF_ERROR(check_tokens(token_begin, num_tokens));
  EPS_RETURN_IF_ERROR(check_size(out.size(), num_tokens, hidden));
  fill_stream(seed, {DataStream::kPayload, rank, 0}, token_begin, num_tokens, hidden, out,
              [](std::uint32_t bits) { return bf16::from_float(payload_from_bits(bits)); });
  return Status();
}

Status fill_router_logits(std::uint64_t seed, std::uint32_t layer, std::uint32_t rank,
                          std::uint64_t token_begin, std::uint64_t num_tokens, std::uint32_t num_experts,
                          std::span<float> out) {
  EPS_RETURN_IF_ERROR(check_layer(layer));
  EPS_RETURN_IF_ERROR(check_tokens(token_begin, num_tokens));
  EPS_RETURN_IF_ERROR(check_size(out.size(), num_tokens, num_experts));
  fill_stream(seed, {DataStream::kRouterLogits, rank, layer}, token_begin, num_tokens, num_experts, out,
              logit_from_bits);
  return Status();
}

Status fill_expert_weight(std::uint64_t seed, std::uint32_t layer, WeightMatrix matrix, std::uint32_t expert,
                          std::uint32_t rows, std::uint32_t cols, std::span<bf16> out) {
  EPS_RETURN_IF_ERROR(check_layer(layer));
  if (cols == 0) return invalid_argument("cols", "the fan-in must be >= 1, got 0");
  EPS_RETURN_IF_ERROR(check_size(out.size(), rows, cols));
  const float scale = static_cast<float>(1.0 / static_cast<double>(1u << weight_scale_exponent(cols)));
  const StreamAddress address{DataStream::kExpertWeight, expert,
                              (static_cast<std::uint32_t>(matrix) << 16) | layer};
  fill_stream(seed, address, 0, rows, cols, out,
              [scale](std::uint32_t bits) { return bf16::from_float(payload_from_bits(bits) * scale); });
  return Status();
}

Status fill_topk_weights(std::uint64_t seed, std::uint32_t layer, std::uint32_t step, std::uint32_t rank,
                         std::uint64_t token_begin, std::uint64_t num_tokens, std::uint32_t top_k,
                         std::span<float> out) {
  EPS_RETURN_IF_ERROR(check_layer(layer));
  if (step > kMaxStep) return out_of_range<std::uint32_t>("step", 0, kMaxStep, step);
  EPS_RETURN_IF_ERROR(check_tokens(token_begin, num_tokens));
  EPS_RETURN_IF_ERROR(check_size(out.size(), num_tokens, top_k));
  fill_stream(seed, {DataStream::kTopkWeight, rank, layer_step_coord(layer, step)}, token_begin, num_tokens,
              top_k, out, topk_weight_from_bits);
  return Status();
}

}  // namespace eps::data
