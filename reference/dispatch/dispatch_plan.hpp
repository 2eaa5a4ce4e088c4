// The dispatch problem (docs/dispatch.md 5): shapes, payload type, placement and the routing of ALL ranks,
// validated once and materialized (R·T·K ints and floats, small even for the largest presets), so that any
// rank can compute its own expected outputs without communication. Payload rows are NOT held here: they are
// regenerated on demand through a RowSource (row_source.hpp).
//
// Inputs on rank r (docs/dispatch.md 5): `topk_idx [T_r, K]` (int32 here; -1 = masked slot) and `topk_weights
// [T_r, K]` (f32). `dst_ranks(r, t)` is the set of ranks that own t's valid slots (docs/dispatch.md 5),
// computed with the ExpertMap (expert_map.hpp).
//
// Validation (`DispatchPlan::make`) rejects, with one message naming the field and its allowed range:
// - num_ranks outside [1, kMaxRanks]; num_experts outside [1, kMaxExperts] or not a multiple of num_ranks
//   when no placement is given; top_k outside [1, kMaxTopK]; hidden outside [1, kMaxHidden];
//   hidden not a multiple of 128 for fp8 payloads (docs/numerics.md 1.2); max_tokens_per_rank outside
//   [0, kMaxTokensPerRank]; expert_alignment outside [1, kMaxExpertAlignment];
// - a placement whose num_ranks / num_experts differ from the config;
// - routing with a number of entries other than num_ranks; num_tokens outside [0, max_tokens_per_rank]
//   (T_r > T_max is an input error, docs/dispatch.md 5.4, for every layout); topk_idx / topk_weights whose
//   size is not num_tokens · top_k;
// - a topk_idx entry outside [-1, num_experts);
// - the same expert twice among one token's valid slots: an ERROR (DeepEP requires distinct experts per
//   token; the contract does not say). It also guarantees at most one row per (local expert, r, t) in the
//   expert-major and LL layouts;
// - a NaN weight on a valid slot (docs/errors.md 10). Weights of masked slots are never read and may hold
// anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/dispatch/expert_map.hpp"

namespace eps::dispatch {

inline constexpr int kMaxTopK = 64;
inline constexpr int kMaxHidden = 1 << 20;
inline constexpr int kMaxTokensPerRank = 1 << 20;
inline constexpr int kMaxExpertAlignment = 1 << 20;
inline constexpr int kFp8GroupSize = 128;  // channels per fp8 scale (docs/numerics.md 1.2)

// Dispatch payload type. Combine is always bf16 (docs/dispatch.md 5.5).
enum class PayloadType { kBf16, kFp8 };

// Bytes of one payload row without scales: 2H for bf16 (bf16 bit patterns, native byte order), H for fp8
// (e4m3fn codes).
std::size_t payload_row_bytes(PayloadType dtype, int hidden);
// fp32 scales per row: H/128 for fp8, 0 for bf16.
int payload_num_scales(PayloadType dtype, int hidden);

struct DispatchConfig {
  int num_ranks = 1;            // R
  int num_experts = 1;          // E (logical experts)
  int top_k = 1;                // K
  int hidden = 1;               // H
  int max_tokens_per_rank = 0;  // T_max: the LL buffer capacity; every T_r must be <= T_max
  PayloadType dtype = PayloadType::kBf16;
  int expert_alignment = 1;  // docs/dispatch.md 5.2 / 5.3 rounding of per-expert counts and segments
};

// The routing of one source rank.
struct RankRouting {
  int num_tokens = 0;               // T_r
  std::vector<int> topk_idx;        // [T_r, K], row-major; -1 = masked
  std::vector<float> topk_weights;  // [T_r, K], row-major
};

// (source rank, source token) of a received row.
struct SourceToken {
  int rank = -1;
  int token = -1;
  friend bool operator==(const SourceToken&, const SourceToken&) = default;
};

class DispatchPlan {
 public:
  // Validates everything listed at the top of this header. Without a placement the default ExpertMap
  // is used.
  static Result<DispatchPlan> make(const DispatchConfig& config, std::vector<RankRouting> routing,
                                   std::optional<ExpertMap> placement = std::nullopt);

  const DispatchConfig& config() const { return config_; }
  const ExpertMap& expert_map() const { return map_; }
  int num_ranks() const { return config_.num_ranks; }
  int top_k() const { return config_.top_k; }
  int hidden() const { return config_.hidden; }
  // Local experts per rank (L, or P/R under an EPLB placement): the first dimension of the LL layout.
  int num_local_experts() const { return map_.slots_per_rank(); }
  std::size_t row_bytes() const { return payload_row_bytes(config_.dtype, config_.hidden); }
  int num_scales() const { return payload_num_scales(config_.dtype, config_.hidden); }

  // Preconditions below: rank in [0, num_ranks()), token in [0, num_tokens(rank)), k in [0, top_k()).
  int num_tokens(int rank) const { return routing_[rank].num_tokens; }
  std::span<const int> topk_idx(int rank, int token) const;
  std::span<const float> topk_weights(int rank, int token) const;
  // Where slot k of (rank, token) goes; {-1, -1} for a masked slot.
  SlotPlacement placement(int rank, int token, int k) const;
  // dst_ranks(rank, token), ascending, without repeats; empty when every slot is masked.
  std::span<const int> dst_ranks(int rank, int token) const;
  bool sends_to(int rank, int token, int dst) const;

 private:
  explicit DispatchPlan(ExpertMap map) : map_(std::move(map)) {}
  std::size_t flat(int rank, int token) const { return token_begin_[rank] + static_cast<std::size_t>(token); }

  DispatchConfig config_;
  ExpertMap map_;
  std::vector<RankRouting> routing_;
  std::vector<std::size_t> token_begin_;   // [R + 1] prefix over T_r
  std::vector<SlotPlacement> placements_;  // [sum T_r, K]
  std::vector<int> dst_ranks_;             // [sum T_r, K], first dst_count_ entries used per token
  std::vector<int> dst_count_;             // [sum T_r]
};

}  // namespace eps::dispatch
