// Host batch fills of the docs/numerics.md 2.2 values (values.hpp): bit-identical to the element functions,
// one Philox block per four columns. Row t of each output is token (token_begin + t); outputs are row-major.
// Kept apart from values.hpp so that device code can include the element functions without the Status
// machinery (fmt does not compile under nvcc).
#pragma once

#include <cstdint>
#include <span>

#include "reference/common/status.hpp"
#include "reference/data/values.hpp"

namespace eps::data {

// Errors (Status kInvalidArgument): out.size() != rows * cols ("out: ..."), layer > kMaxLayer,
// token_begin + num_tokens > 2^32.

// x [num_tokens, hidden] bf16 payloads of `rank`'s tokens [token_begin, token_begin + num_tokens).
Status fill_payload(std::uint64_t seed, std::uint32_t rank, std::uint64_t token_begin,
                    std::uint64_t num_tokens, std::uint32_t hidden, std::span<bf16> out);

// logits [num_tokens, num_experts] fp32 of `rank`'s tokens at `layer` (input of the routers, docs/routing.md
// 3).
Status fill_router_logits(std::uint64_t seed, std::uint32_t layer, std::uint32_t rank,
                          std::uint64_t token_begin, std::uint64_t num_tokens, std::uint32_t num_experts,
                          std::span<float> out);

// A [rows, cols] weight matrix of `expert` (fan_in = cols), e.g. W1 of expert e: rows F, cols H.
Status fill_expert_weight(std::uint64_t seed, std::uint32_t layer, WeightMatrix matrix, std::uint32_t expert,
                          std::uint32_t rows, std::uint32_t cols, std::span<bf16> out);

// topk_weights [num_tokens, top_k] fp32 of `rank`'s tokens at (layer, step); step <= kMaxStep.
Status fill_topk_weights(std::uint64_t seed, std::uint32_t layer, std::uint32_t step, std::uint32_t rank,
                         std::uint64_t token_begin, std::uint64_t num_tokens, std::uint32_t top_k,
                         std::span<float> out);

}  // namespace eps::data
