#include "reference/data/workload.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "reference/data/philox.hpp"
#include "reference/data/values.hpp"

namespace eps::data {
namespace {

constexpr std::string_view kPatternList =
    "uniform, zipf:s, hot:e,p, all-to-one, spread, masked:p, spatial:w, drift:steps, trace:FILE";

// ---------------------------------------------------------------------------------------------------
// Parsing

template <typename T>
bool parse_number(std::string_view text, T& value) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

Result<double> parse_probability(std::string_view field, std::string_view text) {
  double value = 0.0;
  if (!parse_number(text, value))
    return invalid_argument(field, "expected a number in [0, 1], got '{}'", text);
  if (!(value >= 0.0 && value <= 1.0)) return out_of_range(field, 0.0, 1.0, value);
  return value;
}

Result<int> parse_int(std::string_view field, std::string_view text, int lo, int hi) {
  int value = 0;
  if (!parse_number(text, value)) {
    return invalid_argument(field, "expected an integer in [{}, {}], got '{}'", lo, hi, text);
  }
  if (value < lo || value > hi) return out_of_range(field, lo, hi, value);
  return value;
}

Result<WorkloadSpec> parse_parameters(std::string_view name, std::string_view args) {
  WorkloadSpec spec;
  if (name == "zipf") {
    spec.pattern = WorkloadPattern::kZipf;
    if (!parse_number(args, spec.zipf_s)) {
      return invalid_argument("zipf:s", "expected a number in [0, 3], got '{}'", args);
    }
    if (!(spec.zipf_s >= 0.0 && spec.zipf_s <= 3.0)) return out_of_range("zipf:s", 0.0, 3.0, spec.zipf_s);
  } else if (name == "hot") {
    spec.pattern = WorkloadPattern::kHot;
    const std::size_t comma = args.find(',');
    if (comma == std::string_view::npos)
      return invalid_argument("hot", "expected hot:e,p, got 'hot:{}'", args);
    // The upper bound e < E is checked against the shape in validate_workload.
    const std::string_view expert = args.substr(0, comma);
    if (!parse_number(expert, spec.hot_expert) || spec.hot_expert < 0) {
      return invalid_argument("hot:e", "expected an expert id in [0, E), got '{}'", expert);
    }
    EPS_ASSIGN_OR_RETURN(spec.hot_fraction, parse_probability("hot:p", args.substr(comma + 1)));
  } else if (name == "masked") {
    spec.pattern = WorkloadPattern::kMasked;
    EPS_ASSIGN_OR_RETURN(spec.mask_p, parse_probability("masked:p", args));
  } else if (name == "spatial") {
    spec.pattern = WorkloadPattern::kSpatial;
    EPS_ASSIGN_OR_RETURN(spec.window, parse_int("spatial:w", args, 1, static_cast<int>(kMaxTokensPerRank)));
  } else if (name == "drift") {
    spec.pattern = WorkloadPattern::kDrift;
    EPS_ASSIGN_OR_RETURN(spec.steps, parse_int("drift:steps", args, 1, static_cast<int>(kMaxStep) + 1));
  } else if (name == "trace") {
    spec.pattern = WorkloadPattern::kTrace;
    if (args.empty()) return invalid_argument("trace:FILE", "expected a .json or .csv path, got ''");
    spec.trace_path = std::string(args);
    EPS_ASSIGN_OR_RETURN(RoutingTrace trace, load_trace(spec.trace_path));
    spec.trace = std::make_shared<const RoutingTrace>(std::move(trace));
  } else {
    return invalid_argument("workload", "unknown pattern '{}:{}' (allowed: {})", name, args, kPatternList);
  }
  return spec;
}

// ---------------------------------------------------------------------------------------------------
// Sampling

std::uint64_t mul_high(std::uint64_t a, std::uint64_t b) {
  __extension__ using U128 = unsigned __int128;
  return static_cast<std::uint64_t>((static_cast<U128>(a) * b) >> 64);
}

// A token's random draws: pair j of stream kRoutingSelect at (rank, layer, step), row = token.
// Pair 0 drives pattern decisions (hot), pairs 1.. the sequential draws.
struct TokenDraws {
  std::uint64_t seed;
  StreamAddress address;
  std::uint32_t token;
  std::uint64_t pair(std::uint32_t j) const { return stream_bits64(seed, address, token, j); }
};

// Sequential weighted sampling without replacement: draw j picks index i with probability
// weights[i] / (sum of the weights not yet drawn), using 64-bit draw `draws.pair(first_pair + j)`.
// Writes up to `count` indices to out[0..); returns how many (fewer when fewer weights are positive).
// `weights` is consumed (drawn entries are zeroed).
int sample_weighted(std::vector<std::uint64_t>& weights, int count, const TokenDraws& draws,
                    std::uint32_t first_pair, std::int32_t* out) {
  std::uint64_t total = std::accumulate(weights.begin(), weights.end(), std::uint64_t{0});
  int drawn = 0;
  for (; drawn < count && total > 0; ++drawn) {
    const std::uint64_t target = mul_high(draws.pair(first_pair + drawn), total);
    std::uint64_t cumulative = 0;
    std::size_t pick = 0;
    while (pick < weights.size()) {
      cumulative += weights[pick];
      if (target < cumulative) break;
      ++pick;
    }
    out[drawn] = static_cast<std::int32_t>(pick);
    total -= weights[pick];
    weights[pick] = 0;
  }
  return drawn;
}

// Scales positive real weights to integers summing to about 2^31, each at least 1, so the 64-bit draws of
// sample_weighted resolve them with negligible bias.
std::vector<std::uint64_t> integer_weights(const std::vector<double>& real) {
  const double sum = std::accumulate(real.begin(), real.end(), 0.0);
  std::vector<std::uint64_t> weights(real.size());
  for (std::size_t i = 0; i < real.size(); ++i) {
    weights[i] = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(real[i] / sum * 0x1p31)));
  }
  return weights;
}

// The layer's seeded popularity order: perm[i] = the expert at popularity position i (experts sorted by
// their kExpertPermutation word, docs/numerics.md 1.3 canonical order: key descending, then expert
// ascending).
std::vector<int> expert_permutation(std::uint64_t seed, int layer, int num_experts) {
  const StreamAddress address{DataStream::kExpertPermutation, 0, static_cast<std::uint32_t>(layer)};
  std::vector<std::uint32_t> key(num_experts);
  for (int e = 0; e < num_experts; ++e) key[e] = stream_bits(seed, address, 0, static_cast<std::uint32_t>(e));
  std::vector<int> perm(num_experts);
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(),
            [&](int a, int b) { return key[a] > key[b] || (key[a] == key[b] && a < b); });
  return perm;
}

std::vector<std::uint64_t> zipf_weights(const std::vector<int>& perm, double s) {
  std::vector<double> real(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) real[perm[i]] = std::pow(static_cast<double>(i + 1), -s);
  return integer_weights(real);
}

std::vector<std::uint64_t> drift_weights(const std::vector<int>& perm, int step, int steps) {
  const double n = static_cast<double>(perm.size());
  const double sigma = std::max(n / 8.0, 1.0);
  const double centre = n * step / steps;
  std::vector<double> real(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    const double offset = std::fabs(static_cast<double>(i) - centre);
    const double distance = std::min(offset, n - offset);
    real[perm[i]] = std::exp(-distance * distance / (2.0 * sigma * sigma)) + 0.01;
  }
  return integer_weights(real);
}

// ---------------------------------------------------------------------------------------------------
// Generation

// Everything a token's routing needs besides the token index; built once per request.
struct Context {
  const WorkloadSpec& spec;
  const RoutingShape& shape;
  const RoutingRequest& request;
  StreamAddress select;
  std::vector<std::uint64_t> base_weights;  // uniform / zipf / drift / hot (hot expert excluded) / all-to-one
  std::vector<std::uint64_t> scratch;
  std::int64_t cached_window = -1;  // spatial: the window whose preferred set is in `preferred`
  std::vector<std::int32_t> preferred;
};

void fill_base_weights(Context& ctx) {
  const int num_experts = ctx.shape.num_experts;
  const auto& spec = ctx.spec;
  if (spec.pattern == WorkloadPattern::kZipf || spec.pattern == WorkloadPattern::kDrift) {
    const std::vector<int> perm = expert_permutation(ctx.request.seed, ctx.request.layer, num_experts);
    ctx.base_weights = spec.pattern == WorkloadPattern::kZipf
                           ? zipf_weights(perm, spec.zipf_s)
                           : drift_weights(perm, ctx.request.step, spec.steps);
    return;
  }
  ctx.base_weights.assign(num_experts, 1);
  if (spec.pattern == WorkloadPattern::kHot) ctx.base_weights[spec.hot_expert] = 0;
  if (spec.pattern == WorkloadPattern::kAllToOne) {
    const int local = num_experts / ctx.shape.num_ranks;
    std::fill(ctx.base_weights.begin() + local, ctx.base_weights.end(), 0);
  }
}

void route_hot(Context& ctx, const TokenDraws& draws, std::int32_t* idx) {
  const int k = ctx.shape.top_k;
  const std::uint64_t control = draws.pair(0);
  ctx.scratch = ctx.base_weights;
  // Low word decides "hot" (probability p, threshold on 32 bits); high word picks the hot slot.
  const auto threshold = static_cast<std::uint64_t>(std::llround(ctx.spec.hot_fraction * 0x1p32));
  if ((control & 0xffffffffu) >= threshold) {
    sample_weighted(ctx.scratch, k, draws, 1, idx);
    return;
  }
  const int slot = static_cast<int>(((control >> 32) * static_cast<std::uint64_t>(k)) >> 32);
  // The K-1 others fill slots 0..K-2 (the rest stay -1), then shift right to open the hot slot.
  sample_weighted(ctx.scratch, k - 1, draws, 1, idx);
  std::copy_backward(idx + slot, idx + k - 1, idx + k);
  idx[slot] = ctx.spec.hot_expert;
}

void route_spread(Context& ctx, const TokenDraws& draws, std::int32_t* idx) {
  const int ranks = ctx.shape.num_ranks;
  const std::uint64_t local = ctx.shape.num_experts / ranks;
  ctx.scratch = ctx.base_weights;
  for (int q = 0; q < ranks; ++q) {
    const auto expert = static_cast<std::int32_t>(q * local + mul_high(draws.pair(1 + q), local));
    idx[q] = expert;
    ctx.scratch[expert] = 0;
  }
  sample_weighted(ctx.scratch, ctx.shape.top_k - ranks, draws, 1 + ranks, idx + ranks);
}

void route_spatial(Context& ctx, const TokenDraws& draws, std::int64_t token, std::int32_t* idx) {
  const int k = ctx.shape.top_k;
  const std::int64_t window = token / ctx.spec.window;
  if (window != ctx.cached_window) {
    // The window's preferred set depends only on (seed, rank, layer, step, window): cached, not carried over.
    const StreamAddress address{DataStream::kWindowPreference, ctx.select.coord0, ctx.select.coord1};
    const TokenDraws window_draws{ctx.request.seed, address, static_cast<std::uint32_t>(window)};
    ctx.preferred.assign(k, -1);
    ctx.scratch.assign(ctx.shape.num_experts, 1);
    sample_weighted(ctx.scratch, k, window_draws, 0, ctx.preferred.data());
    ctx.cached_window = window;
  }
  // Others weigh K, preferred experts 9 (E - K): the preferred set carries 90% of the first draw's mass.
  const auto k64 = static_cast<std::uint64_t>(k);
  ctx.scratch.assign(ctx.shape.num_experts, k64);
  for (std::int32_t e : ctx.preferred)
    ctx.scratch[e] = 9 * (static_cast<std::uint64_t>(ctx.shape.num_experts) - k64);
  sample_weighted(ctx.scratch, k, draws, 1, idx);
}

void route_trace(const Context& ctx, std::int64_t token, std::int32_t* idx) {
  const std::int32_t* row = ctx.spec.trace->ranks[ctx.request.rank].data() + token * ctx.shape.top_k;
  std::copy(row, row + ctx.shape.top_k, idx);
}

void apply_slot_mask(const Context& ctx, std::uint32_t token, std::int32_t* idx) {
  const auto threshold = static_cast<std::uint64_t>(std::llround(ctx.spec.mask_p * 0x1p32));
  const StreamAddress address{DataStream::kRoutingSlotMask, ctx.select.coord0, ctx.select.coord1};
  for (int k = 0; k < ctx.shape.top_k; ++k) {
    if (stream_bits(ctx.request.seed, address, token, static_cast<std::uint32_t>(k)) < threshold) idx[k] = -1;
  }
}

void route_token(Context& ctx, std::int64_t token, std::int32_t* idx) {
  const int k = ctx.shape.top_k;
  std::fill(idx, idx + k, -1);
  const TokenDraws draws{ctx.request.seed, ctx.select, static_cast<std::uint32_t>(token)};
  switch (ctx.spec.pattern) {
    case WorkloadPattern::kHot:
      route_hot(ctx, draws, idx);
      break;
    case WorkloadPattern::kSpread:
      route_spread(ctx, draws, idx);
      break;
    case WorkloadPattern::kSpatial:
      route_spatial(ctx, draws, token, idx);
      break;
    case WorkloadPattern::kTrace:
      route_trace(ctx, token, idx);
      break;
    default:  // uniform, zipf, drift, all-to-one, masked: weighted draws from the base weights
      ctx.scratch = ctx.base_weights;
      sample_weighted(ctx.scratch, k, draws, 1, idx);
      if (ctx.spec.pattern == WorkloadPattern::kMasked)
        apply_slot_mask(ctx, static_cast<std::uint32_t>(token), idx);
      break;
  }
}

Status validate_request(const WorkloadSpec& spec, const RoutingShape& shape, const RoutingRequest& request) {
  if (request.rank < 0 || request.rank >= shape.num_ranks) {
    return out_of_range("rank", 0, shape.num_ranks - 1, request.rank);
  }
  if (request.layer < 0 || request.layer > static_cast<int>(kMaxLayer)) {
    return out_of_range("layer", 0, static_cast<int>(kMaxLayer), request.layer);
  }
  const int max_step = spec.pattern == WorkloadPattern::kDrift ? spec.steps - 1 : static_cast<int>(kMaxStep);
  if (request.step < 0 || request.step > max_step) return out_of_range("step", 0, max_step, request.step);
  if (request.token_begin < 0 || request.token_begin > kMaxTokensPerRank) {
    return out_of_range<std::int64_t>("token_begin", 0, kMaxTokensPerRank, request.token_begin);
  }
  const std::int64_t max_tokens = kMaxTokensPerRank - request.token_begin;
  if (request.num_tokens < 0 || request.num_tokens > max_tokens) {
    return out_of_range<std::int64_t>("num_tokens", 0, max_tokens, request.num_tokens);
  }
  if (request.sequence_length < 1) {
    return out_of_range("sequence_length", 1, static_cast<int>(kMaxTokensPerRank), request.sequence_length);
  }
  if (spec.pattern == WorkloadPattern::kTrace) {
    const std::int64_t available = spec.trace->num_tokens(static_cast<std::size_t>(request.rank));
    if (request.token_begin + request.num_tokens > available) {
      return invalid_argument("trace:FILE", "rank {} has {} tokens in '{}', tokens [{}, {}) requested",
                              request.rank, available, spec.trace_path, request.token_begin,
                              request.token_begin + request.num_tokens);
    }
  }
  return Status();
}

}  // namespace

Result<WorkloadSpec> parse_workload(std::string_view text) {
  if (text == "uniform") return WorkloadSpec{};
  if (text == "all-to-one" || text == "spread") {
    WorkloadSpec spec;
    spec.pattern = text == "spread" ? WorkloadPattern::kSpread : WorkloadPattern::kAllToOne;
    return spec;
  }
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return invalid_argument("workload", "unknown pattern '{}' (allowed: {})", text, kPatternList);
  }
  return parse_parameters(text.substr(0, colon), text.substr(colon + 1));
}

std::string workload_name(const WorkloadSpec& spec) {
  switch (spec.pattern) {
    case WorkloadPattern::kUniform:
      return "uniform";
    case WorkloadPattern::kZipf:
      return fmt::format("zipf:{}", spec.zipf_s);
    case WorkloadPattern::kHot:
      return fmt::format("hot:{},{}", spec.hot_expert, spec.hot_fraction);
    case WorkloadPattern::kAllToOne:
      return "all-to-one";
    case WorkloadPattern::kSpread:
      return "spread";
    case WorkloadPattern::kMasked:
      return fmt::format("masked:{}", spec.mask_p);
    case WorkloadPattern::kSpatial:
      return fmt::format("spatial:{}", spec.window);
    case WorkloadPattern::kDrift:
      return fmt::format("drift:{}", spec.steps);
    case WorkloadPattern::kTrace:
      return "trace:" + spec.trace_path;
  }
  return "unknown";
}

Status validate_workload(const WorkloadSpec& spec, const RoutingShape& shape) {
  if (shape.num_ranks < 1) return out_of_range("num_ranks", 1, 1 << 20, shape.num_ranks);
  if (shape.num_experts < 1) return out_of_range("num_experts", 1, 1 << 20, shape.num_experts);
  if (shape.top_k < 1 || shape.top_k > shape.num_experts) {
    return out_of_range("top_k", 1, shape.num_experts, shape.top_k);
  }
  const bool per_rank =
      spec.pattern == WorkloadPattern::kAllToOne || spec.pattern == WorkloadPattern::kSpread;
  if (per_rank && shape.num_experts % shape.num_ranks != 0) {
    return invalid_argument("num_experts", "{} needs a multiple of num_ranks {}, got {}", workload_name(spec),
                            shape.num_ranks, shape.num_experts);
  }
  if (spec.pattern == WorkloadPattern::kHot && spec.hot_expert >= shape.num_experts) {
    return out_of_range("hot:e", 0, shape.num_experts - 1, spec.hot_expert);
  }
  if (spec.pattern == WorkloadPattern::kSpread && shape.top_k < shape.num_ranks) {
    return invalid_argument("top_k", "spread needs top_k >= num_ranks ({}) so every rank is reached, got {}",
                            shape.num_ranks, shape.top_k);
  }
  if (spec.pattern != WorkloadPattern::kTrace) return Status();
  if (!spec.trace) return invalid_argument("trace:FILE", "trace '{}' was not loaded", spec.trace_path);
  const RoutingTrace& trace = *spec.trace;
  if (trace.num_experts != 0 && trace.num_experts != shape.num_experts) {
    return invalid_argument("num_experts", "trace '{}' records {} experts, the run has {}", spec.trace_path,
                            trace.num_experts, shape.num_experts);
  }
  if (trace.top_k != shape.top_k) {
    return invalid_argument("top_k", "trace '{}' records top_k {}, the run has {}", spec.trace_path,
                            trace.top_k, shape.top_k);
  }
  for (std::size_t r = 0; r < trace.ranks.size(); ++r) {
    for (std::size_t i = 0; i < trace.ranks[r].size(); ++i) {
      const std::int32_t id = trace.ranks[r][i];
      if (id >= shape.num_experts) {
        return invalid_argument(
            "trace:FILE", "'{}' rank {} token {} slot {}: expert id must be in [-1, {}], got {}",
            spec.trace_path, r, i / trace.top_k, i % trace.top_k, shape.num_experts - 1, id);
      }
    }
  }
  return Status();
}

Result<std::vector<std::uint8_t>> generate_denoise_mask(const WorkloadSpec& spec,
                                                        const RoutingRequest& request) {
  RoutingShape shape;
  shape.num_ranks =
      std::max(request.rank + 1, 1);  // the mask does not depend on R: only the request is checked
  EPS_RETURN_IF_ERROR(validate_request(spec, shape, request));
  const auto step = static_cast<std::uint32_t>(request.step);
  const auto rank = static_cast<std::uint32_t>(request.rank);
  const StreamAddress ratio_address{DataStream::kDenoiseRatio, rank, step};
  const StreamAddress mask_address{DataStream::kDenoiseMask, rank, step};
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(request.num_tokens));
  std::int64_t sample = -1;
  double rho = 0.0;
  for (std::int64_t i = 0; i < request.num_tokens; ++i) {
    const std::int64_t token = request.token_begin + i;
    if (token / request.sequence_length != sample) {
      sample = token / request.sequence_length;
      const double u =
          uniform_from_bits(stream_bits(request.seed, ratio_address, static_cast<std::uint32_t>(sample), 0));
      rho = spec.pattern == WorkloadPattern::kDrift ? (spec.steps - 1 - request.step + u) / spec.steps : u;
    }
    mask[i] = uniform_from_bits(
                  stream_bits(request.seed, mask_address, static_cast<std::uint32_t>(token), 0)) < rho;
  }
  return mask;
}

Result<Routing> generate_routing(const WorkloadSpec& spec, const RoutingShape& shape,
                                 const RoutingRequest& request) {
  EPS_RETURN_IF_ERROR(validate_workload(spec, shape));
  EPS_RETURN_IF_ERROR(validate_request(spec, shape, request));
  const auto coord1 =
      layer_step_coord(static_cast<std::uint32_t>(request.layer), static_cast<std::uint32_t>(request.step));
  const auto rank = static_cast<std::uint32_t>(request.rank);
  Context ctx{spec, shape, request, {DataStream::kRoutingSelect, rank, coord1}, {}, {}, -1, {}};
  if (spec.pattern != WorkloadPattern::kTrace) fill_base_weights(ctx);

  Routing routing;
  routing.num_tokens = request.num_tokens;
  routing.top_k = shape.top_k;
  const auto k = static_cast<std::size_t>(shape.top_k);
  routing.topk_idx.assign(static_cast<std::size_t>(request.num_tokens) * k, -1);
  routing.topk_weights.assign(routing.topk_idx.size(), 0.0f);
  const StreamAddress weight_address{DataStream::kTopkWeight, rank, coord1};
  for (std::int64_t i = 0; i < request.num_tokens; ++i) {
    const std::int64_t token = request.token_begin + i;
    std::int32_t* idx = routing.topk_idx.data() + i * k;
    route_token(ctx, token, idx);
    for (std::size_t j = 0; j < k; ++j) {
      const std::uint32_t bits = stream_bits(request.seed, weight_address, static_cast<std::uint32_t>(token),
                                             static_cast<std::uint32_t>(j));
      routing.topk_weights[i * k + j] = idx[j] >= 0 ? topk_weight_from_bits(bits) : 0.0f;
    }
  }
  EPS_ASSIGN_OR_RETURN(routing.is_masked, generate_denoise_mask(spec, request));
  return routing;
}

Result<std::vector<float>> sample_mask_ratios(std::span<const std::uint8_t> is_masked, int sequence_length) {
  if (sequence_length < 1)
    return out_of_range("sequence_length", 1, static_cast<int>(kMaxTokensPerRank), sequence_length);
  std::vector<float> ratios;
  for (std::size_t begin = 0; begin < is_masked.size(); begin += static_cast<std::size_t>(sequence_length)) {
    const std::size_t end = std::min(is_masked.size(), begin + static_cast<std::size_t>(sequence_length));
    std::size_t count = 0;
    for (std::size_t i = begin; i < end; ++i) count += is_masked[i] != 0;
    ratios.push_back(static_cast<float>(count) / static_cast<float>(end - begin));
  }
  return ratios;
}

}  // namespace eps::data
