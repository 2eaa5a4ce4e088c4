// Workload generators (docs/numerics.md 2.3): the routing of a rank's tokens (top-k expert ids and weights)
// and the per-token denoising mask of docs/routing.md 3.4, for a named pattern, deterministic and addressable
// per token.
//
// Determinism contract. Token t of rank r gets its routing from (seed, r, layer, step, t) and the pattern
// only: never from other tokens, from the batch it is generated in, or from generation order. Per-pattern
// shared state is itself a pure function of (seed, layer, ...): the zipf/drift expert permutation of the
// layer, the drift popularity of the step, the spatial preferred set of the token's window (window
// t / w of rank r). Nothing depends on R except where the pattern is defined by R (all-to-one, spread).
// Streams and coordinates: values.hpp.
//
// Patterns (`parse_workload` text; parameters are range-checked):
//   uniform       K distinct experts uniformly without replacement.
//   zipf:s        s in [0, 3]. Experts are ordered by a seeded permutation of the layer (sorted by a
//                 Philox key, docs/numerics.md 1.3 canonical order); the i-th (0-based) has weight (i +
//                 1)^-s. K distinct experts drawn sequentially without replacement proportional to weight, so
//                 with K = 1 the top two experts' frequencies have ratio 2^s.
//   hot:e,p       e in [0, E) (checked against the shape), p in [0, 1]. With probability p the token
//                 contains expert e (at a uniformly drawn slot) plus K-1 uniform others; otherwise K uniform
//                 experts other than e (with K = E the last slot is then -1). The fraction of tokens routed
//                 to e is p.
//   all-to-one    Every token only to rank 0's experts [0, E/R) (E must be a multiple of R); K distinct
//                 uniform ones, slots beyond E/R are -1.
//   spread        Every token reaches every rank: slot q < R is a uniform local expert of rank q, slots
//                 R..K-1 uniform among the rest. Needs K >= R and E a multiple of R.
//   masked:p      p in [0, 1]. Uniform routing, then each slot independently -1 with probability p (a token
//                 ends with all slots -1 with probability p^K).
//   spatial:w     w >= 1. DiT-like: tokens [w*i, w*(i+1)) of a rank form window i, which draws a
//                 preferred set of K experts uniformly; every token draws K experts without replacement
//                 with weight 9 (E - K) per preferred expert and K per other one, so the preferred set
//                 carries 90% of the first draw (E = 64, K = 4: a token holds ~3.3 preferred experts).
//   drift:steps   steps in [1, kMaxStep + 1]; requires step < steps. Popularity is a circular Gaussian bump
//                 (sigma = max(E/8, 1) positions, plus a floor of 1% of the peak) over the layer's seeded
//                 expert permutation, centred at position E * step / steps: it moves smoothly with the step
//                 and is far from the start half-way through. K drawn as for zipf.
//   trace:FILE    Replay of a recorded trace, FILE ending in .json or .csv (formats at `RoutingTrace`).
//                 Token t of rank r replays row t of rank r (which must exist); E and K must match the run.
//
// topk_weights: every valid slot gets `topk_weight(seed, layer, step, rank, token, slot)` (values.hpp, a
// multiple of 2^-10 in (0, 1]); a -1 slot gets 0.0f. No expert appears twice in one token.
//
// Denoising mask (docs/routing.md 3.4): a rank's tokens form samples of S = `sequence_length` contiguous
// tokens (sample b = t / S). Each sample draws a target ratio rho_b (uniform in [0, 1); for drift, uniform in
// the step's band [(steps-1-step)/steps, (steps-step)/steps), so masking decreases along the denoising
// trajectory); each token is masked with probability rho_b. The empirical ratio r_b = masked / S is what
// docs/routing.md 3.4 schedules consume (`sample_mask_ratios`).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reference/common/status.hpp"

namespace eps::data {

enum class WorkloadPattern { kUniform, kZipf, kHot, kAllToOne, kSpread, kMasked, kSpatial, kDrift, kTrace };

// A recorded routing trace: ranks[r] holds rank r's top-k ids row-major [T_r, top_k], -1 = none.
//
// JSON: {"num_experts": E, "top_k": K, "ranks": [[[id, ...], ...], ...]} — ranks[r][t] is token t's list of
//   exactly K ids; a rank with no tokens is [].
// CSV: one line per token "rank,token,id0,id1,...,id{K-1}"; blank lines and lines starting with '#' are
//   skipped, as is a first line starting with "rank" (a header). K = number of ids (same on every line);
//   a rank's tokens must be exactly 0..T_r-1 (any line order); the number of ranks is max rank + 1 (ranks
//   without lines have 0 tokens; the JSON form is needed to record trailing zero-token ranks). CSV does
//   not record E: num_experts is 0 and the ids are checked against the run's E.
// Both: ids in [-1, E) (upper bound where E is known), no valid id twice within a token.
struct RoutingTrace {
  int num_experts = 0;  // 0 = not recorded (CSV)
  int top_k = 0;
  std::vector<std::vector<std::int32_t>> ranks;

  std::int64_t num_tokens(std::size_t rank) const {
    return rank < ranks.size() && top_k > 0 ? static_cast<std::int64_t>(ranks[rank].size()) / top_k : 0;
  }
};

// A parsed workload. Only the fields of `pattern` are meaningful.
struct WorkloadSpec {
  WorkloadPattern pattern = WorkloadPattern::kUniform;
  double zipf_s = 0.0;
  int hot_expert = 0;
  double hot_fraction = 0.0;
  double mask_p = 0.0;
  int window = 1;
  int steps = 1;
  std::string trace_path;
  std::shared_ptr<const RoutingTrace> trace;  // loaded by parse_workload
};

// Parses "uniform" | "zipf:S" | "hot:E,P" | "all-to-one" | "spread" | "masked:P" | "spatial:W" |
// "drift:STEPS" | "trace:FILE" (trace files are read and validated here). Errors name the parameter and
// its range, e.g. "zipf:s: must be in [0, 3], got 5"; shape-dependent checks are in validate_workload.
Result<WorkloadSpec> parse_workload(std::string_view text);

// The canonical text of a spec (parse_workload(workload_name(s)) gives back s), e.g. "hot:3,0.5".
std::string workload_name(const WorkloadSpec& spec);

struct RoutingShape {
  int num_ranks = 1;    // R >= 1
  int num_experts = 1;  // E >= 1
  int top_k = 1;        // K in [1, E]
};

// Shape-dependent checks: R >= 1, E >= 1, K in [1, E]; hot e < E; all-to-one/spread E % R == 0; spread
// K >= R; trace E (when recorded) and K equal to the shape's, every id < E.
Status validate_workload(const WorkloadSpec& spec, const RoutingShape& shape);

// Which tokens to generate: rank's tokens [token_begin, token_begin + num_tokens).
struct RoutingRequest {
  std::uint64_t seed = 0;
  int rank = 0;   // in [0, R)
  int layer = 0;  // in [0, kMaxLayer]
  int step = 0;   // in [0, kMaxStep]; drift: in [0, steps)
  std::int64_t token_begin = 0;
  std::int64_t num_tokens = 0;  // >= 0; token_begin + num_tokens <= 2^31 - 1
  int sequence_length = 512;    // S >= 1, samples for the denoising mask
};

struct Routing {
  std::int64_t num_tokens = 0;
  int top_k = 0;
  std::vector<std::int32_t> topk_idx;   // [num_tokens, top_k], -1 = none
  std::vector<float> topk_weights;      // [num_tokens, top_k], 0.0f where topk_idx == -1
  std::vector<std::uint8_t> is_masked;  // [num_tokens], 1 = masked position (docs/routing.md 3.4)
};

// The routing and mask of the requested tokens. Validates the spec against the shape and the request.
Result<Routing> generate_routing(const WorkloadSpec& spec, const RoutingShape& shape,
                                 const RoutingRequest& request);

// Only the denoising mask of the requested tokens (the same flags generate_routing returns).
Result<std::vector<std::uint8_t>> generate_denoise_mask(const WorkloadSpec& spec,
                                                        const RoutingRequest& request);

// Per-sample empirical mask ratios r_b = (masked tokens of sample b) / (tokens of sample b), samples of
// `sequence_length` contiguous flags starting at flag 0; a trailing partial sample is divided by its own
// length. The ratio is float(count) / float(length), one fp32 division.
Result<std::vector<float>> sample_mask_ratios(std::span<const std::uint8_t> is_masked, int sequence_length);

// ---- Traces ----
// `source` names the input in error messages (a path or "<string>").
Result<RoutingTrace> parse_trace_json(std::string_view text, std::string_view source);
Result<RoutingTrace> parse_trace_csv(std::string_view text, std::string_view source);
// Reads FILE and parses it by extension (.json or .csv).
Result<RoutingTrace> load_trace(const std::string& path);
std::string trace_to_json(const RoutingTrace& trace);
std::string trace_to_csv(const RoutingTrace& trace);
// A trace recording per_rank[r].topk_idx for every rank (all with the same top_k).
Result<RoutingTrace> trace_from_routings(int num_experts, std::span<const Routing> per_rank);

// ---- Tokens per rank (--tokens-per-rank) ----
// "N"        every rank has N tokens;
// "a,b,c"    an explicit list: exactly 1 or R entries (checked by resolve_tokens_per_rank);
// "a:b"      per-rank counts drawn uniformly in [a, b] from (seed, rank) only (stream kTokensPerRank),
//            so rank r's count does not depend on R.
// Counts are in [0, kMaxTokensPerRank]; zero-token ranks are allowed everywhere.
inline constexpr std::int64_t kMaxTokensPerRank = (std::int64_t{1} << 31) - 1;

struct TokensPerRankSpec {
  enum class Kind { kFixed, kList, kRange };
  Kind kind = Kind::kFixed;
  std::vector<std::int64_t> values;  // kFixed: one value; kList: the list; kRange: {a, b}
};

Result<TokensPerRankSpec> parse_tokens_per_rank(std::string_view text);
// T_r of every rank r in [0, num_ranks).
Result<std::vector<std::int64_t>> resolve_tokens_per_rank(const TokensPerRankSpec& spec, int num_ranks,
                                                          std::uint64_t seed);

}  // namespace eps::data
