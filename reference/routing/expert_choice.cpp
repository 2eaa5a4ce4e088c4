#include "reference/routing/expert_choice.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "reference/numerics/transcendental.hpp"
#include "reference/routing/scores.hpp"

namespace eps::routing {
namespace {

constexpr float kGateEpsilon = 1e-20f;  // docs/routing.md 3.3 denominator guard

// Canonical order (docs/numerics.md 1.3) of (key, position) as one unsigned integer: the order-preserving
// bits of the key above the complemented position, so a larger integer comes first. -0.0 is folded onto +0.0
// because the two compare equal as keys (they tie and the lower position wins).
std::uint64_t canonical_code(float key, std::uint32_t position) {
  const float folded = key + 0.0f;  // -0.0 + 0.0 = +0.0 (round to nearest); every other key unchanged
  std::uint32_t bits;
  std::memcpy(&bits, &folded, sizeof bits);
  bits = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  return (static_cast<std::uint64_t>(bits) << 32) | (0xffffffffu - position);
}

std::uint32_t code_position(std::uint64_t code) {
  return 0xffffffffu - static_cast<std::uint32_t>(code & 0xffffffffu);
}

float code_key(std::uint64_t code) {
  std::uint32_t bits = static_cast<std::uint32_t>(code >> 32);
  bits = (bits & 0x80000000u) != 0 ? bits & 0x7fffffffu : ~bits;
  float key;
  std::memcpy(&key, &bits, sizeof key);
  return key;
}

// The selection of one pass: per expert (ascending) its c kept positions and their keys.
struct Kept {
  std::vector<std::int64_t> positions;
  std::vector<float> keys;
};

// Top-c selection of every expert's column while rows stream in ascending position. Each expert keeps a
// min-heap of c canonical codes whose root is its canonical-last entry. A later row loses every tie, so
// after the first c rows it enters only with a key strictly above the root's: one float compare per logit,
// done for a block of experts at a time so that the compiler vectorizes it. Positions are stored relative
// to the pass start in 32 bits (a pass of 2^32 tokens would need 2^32·E floats of logits). Each heap has
// one extra slot holding the largest code, so that the sift never tests for a missing right child and
// picks the smaller child without a branch (mispredicted branches dominated the sift).
class ColumnSelector {
 public:
  explicit ColumnSelector(std::int64_t num_experts) : num_experts_(num_experts), root_key_(num_experts) {}

  // Starts a pass whose first token is `first_position` (positions are stored relative to it).
  void start(std::int64_t capacity, std::int64_t first_position) {
    capacity_ = capacity;
    first_ = first_position;
    filled_ = 0;
    stride_ = capacity + 1;
    heaps_.assign(static_cast<std::size_t>(num_experts_ * stride_), kSentinel);
  }

  void offer(const float* row, std::int64_t position) {
    const auto local = static_cast<std::uint32_t>(position - first_);
    if (filled_ < capacity_) {
      fill(row, local);
      return;
    }
    std::int64_t j0 = 0;
    for (; j0 + kBlock <= num_experts_; j0 += kBlock) {
      const float* keys = row + j0;
      const float* roots = root_key_.data() + j0;
      int any = 0;
      for (int j = 0; j < kBlock; ++j) any |= keys[j] > roots[j];
      if (any != 0) offer_range(row, local, j0, j0 + kBlock);
    }
    offer_range(row, local, j0, num_experts_);
  }

  // Appends the c positions and keys expert j kept (heap order).
  void append_kept(std::int64_t j, Kept& out) const {
    const std::uint64_t* heap = heaps_.data() + j * stride_;
    for (std::int64_t i = 0; i < capacity_; ++i) {
      out.positions.push_back(first_ + code_position(heap[i]));
      out.keys.push_back(code_key(heap[i]));
    }
  }

 private:
  static constexpr int kBlock = 16;
  static constexpr std::uint64_t kSentinel = ~std::uint64_t{0};

  void offer_range(const float* row, std::uint32_t local, std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; ++j) {
      if (row[j] > root_key_[j]) replace_root(j, row[j], local);
    }
  }

  void fill(const float* row, std::uint32_t local) {
    for (std::int64_t j = 0; j < num_experts_; ++j)
      heaps_[j * stride_ + filled_] = canonical_code(row[j], local);
    if (++filled_ < capacity_) return;
    for (std::int64_t j = 0; j < num_experts_; ++j) {
      for (std::int64_t i = capacity_ / 2 - 1; i >= 0; --i) sift_down(heaps_.data() + j * stride_, i);
      root_key_[j] = code_key(heaps_[j * stride_]);
    }
  }

  void replace_root(std::int64_t j, float key, std::uint32_t local) {
    std::uint64_t* heap = heaps_.data() + j * stride_;
    heap[0] = canonical_code(key, local);
    sift_down(heap, 0);
    root_key_[j] = code_key(heap[0]);
  }

  void sift_down(std::uint64_t* heap, std::int64_t node) const {
    const std::uint64_t moving = heap[node];
    while (true) {
      std::int64_t child = 2 * node + 1;
      if (child >= capacity_) break;
      const std::uint64_t left = heap[child];
      const std::uint64_t right = heap[child + 1];  // the sentinel when child is the last entry
      const bool take_right = right < left;
      child += take_right;
      const std::uint64_t smaller = take_right ? right : left;
      if (smaller >= moving) break;
      heap[node] = smaller;
      node = child;
    }
    heap[node] = moving;
  }

  std::int64_t num_experts_;
  std::int64_t capacity_ = 0;
  std::int64_t first_ = 0;
  std::int64_t filled_ = 0;
  std::int64_t stride_ = 1;
  std::vector<std::uint64_t> heaps_;  // [E, c + 1] canonical codes, the last one the sentinel
  std::vector<float> root_key_;       // [E] key of each heap root
};

// A selection pass over tokens [begin, end) with capacity c per expert.
struct Pass {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t capacity = 0;
};

// docs/routing.md 3.3 batch scope: one capacity from the largest k_b, c = max(floor(B·S·max_b k_b / E), 1).
std::int64_t batch_capacity(const RoutingInput& input, const Routing& routing) {
  const std::int64_t max_k = *std::max_element(routing.k_per_sample.begin(), routing.k_per_sample.end());
  return expert_choice_capacity(input.num_tokens * max_k, input.num_experts);
}

std::vector<Pass> plan_passes(const ExpertChoiceConfig& config, const RoutingInput& input, Routing& routing) {
  const std::int64_t s = input.seq_len;
  std::vector<Pass> passes;
  if (config.scope == CapacityScope::kBatch) {
    const std::int64_t c = batch_capacity(input, routing);
    routing.capacity = c;
    passes.push_back({0, input.num_tokens, c});
    return passes;
  }
  for (std::int64_t b = 0; b < input.num_samples(); ++b) {
    const std::int64_t c = expert_choice_capacity(s * routing.k_per_sample[b], input.num_experts);
    routing.capacity_per_sample.push_back(c);
    passes.push_back({b * s, (b + 1) * s, c});
  }
  return passes;
}

// CSR slots from the per-pass selections: passes are visited in token order and experts ascending, so
// every token's experts come out ascending (docs/layer.md 4.3 slot order for expert choice). The selection
// keys go to slot_gate; the gate step turns them into gates in place (no second gather from the logits).
void build_slots(const std::vector<Pass>& passes, const std::vector<Kept>& kept, Routing& routing) {
  const std::int64_t e = routing.num_experts;
  std::vector<std::int64_t> count(routing.num_tokens + 1, 0);
  for (const Kept& pass : kept) {
    for (std::int64_t i : pass.positions) ++count[i + 1];
  }
  for (std::int64_t t = 0; t < routing.num_tokens; ++t) count[t + 1] += count[t];
  routing.slot_begin = count;
  routing.slot_expert.resize(count.back());
  routing.slot_gate.resize(count.back());
  routing.expert_load.assign(e, 0);
  for (std::size_t p = 0; p < passes.size(); ++p) {
    const std::int64_t c = passes[p].capacity;
    for (std::int64_t j = 0; j < e; ++j) {
      for (std::int64_t n = j * c; n < (j + 1) * c; ++n) {
        const std::int64_t slot = count[kept[p].positions[n]]++;
        routing.slot_expert[slot] = static_cast<std::int32_t>(j);
        routing.slot_gate[slot] = kept[p].keys[n];
      }
      routing.expert_load[j] += c;
    }
  }
}

// docs/routing.md 3.3 EC-DLM gates over J_i, then the Fscale[|J_i|] factor; slot_gate holds the logits l_ij.
void dlm_gates(const ExpertChoiceConfig& config, Routing& routing) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  for (std::int64_t t = 0; t < routing.num_tokens; ++t) {
    const std::int64_t n = routing.num_slots(t);
    if (n == 0) continue;
    float* gates = routing.slot_gate.data() + routing.slot_begin[t];
    float sum = 0.0f;
    if (config.gate == ScoreFunction::kSigmoid) {
      for (std::int64_t s = 0; s < n; ++s) {
        gates[s] = sigmoid(gates[s]);
        sum += gates[s];
      }
    } else {
      float m = kMinusInf;
      for (std::int64_t s = 0; s < n; ++s) m = std::max(m, gates[s]);
      for (std::int64_t s = 0; s < n; ++s) {
        gates[s] = m == kMinusInf ? 0.0f : portable_exp(gates[s] - m);
        sum += gates[s];
      }
    }
    const float denominator = sum + kGateEpsilon;
    const float fscale = config.fscale.empty() ? 1.0f : config.fscale[n];
    for (std::int64_t s = 0; s < n; ++s) gates[s] = (gates[s] / denominator) * fscale;
  }
}

void fill_statistics(Routing& routing) {
  std::int64_t kept = 0;
  for (std::int64_t load : routing.expert_load) kept += load;
  for (std::int64_t t = 0; t < routing.num_tokens; ++t) routing.dropped_tokens += routing.num_slots(t) == 0;
  routing.drop_ratio = static_cast<double>(routing.dropped_tokens) / static_cast<double>(routing.num_tokens);
  std::int64_t capacity_total = routing.capacity.value_or(0);
  for (std::int64_t c : routing.capacity_per_sample) capacity_total += c;
  const double slots = static_cast<double>(routing.num_experts * capacity_total);
  if (slots > 0.0) routing.padding_waste = (slots - static_cast<double>(kept)) / slots;
}

Status check_schedule_input(const ExpertChoiceConfig& config, const RoutingInput& input) {
  const Schedule& schedule = config.k_schedule.schedule;
  if (schedule.kind != ScheduleKind::kStatic && input.mask_ratio.empty()) {
    return invalid_argument("mask_ratio", "required (B = {} values in [0, 1]) for schedule \"{}\"",
                            input.num_samples(), schedule_name(schedule.kind));
  }
  return Status();
}

}  // namespace

std::int64_t expert_choice_capacity(std::int64_t tokens_times_k, std::int64_t num_experts) {
  return std::max<std::int64_t>(tokens_times_k / num_experts, 1);
}

Status validate_expert_choice(const ExpertChoiceConfig& config, std::int64_t num_experts,
                              std::string_view prefix) {
  EPS_RETURN_IF_ERROR(validate_k_schedule(config.k_schedule, num_experts, prefix));
  const std::string fscale = fmt::format("{}fscale", prefix);
  if (config.fscale.empty()) return Status();
  if (config.variant == ExpertChoiceVariant::kSoftmax) {
    return invalid_argument(fscale, "is not used by ec-softmax (gates are the softmax probabilities)");
  }
  if (static_cast<std::int64_t>(config.fscale.size()) != num_experts + 1) {
    return invalid_argument(fscale, "expected E + 1 = {} values, got {}", num_experts + 1,
                            config.fscale.size());
  }
  for (std::size_t n = 0; n < config.fscale.size(); ++n) {
    if (!std::isfinite(config.fscale[n])) {
      return invalid_argument(fmt::format("{}[{}]", fscale, n), "must be finite, got {}", config.fscale[n]);
    }
  }
  return Status();
}

Result<Routing> route_expert_choice(const ExpertChoiceConfig& config, const RoutingInput& input) {
  EPS_RETURN_IF_ERROR(validate_routing_input(input));
  EPS_RETURN_IF_ERROR(validate_expert_choice(config, input.num_experts));
  EPS_RETURN_IF_ERROR(check_schedule_input(config, input));
  Routing routing;
  routing.num_tokens = input.num_tokens;
  routing.num_experts = input.num_experts;
  routing.seq_len = input.seq_len;
  const std::int64_t s = input.seq_len;
  for (std::int64_t b = 0; b < input.num_samples(); ++b) {
    const float r = input.mask_ratio.empty() ? 0.0f : input.mask_ratio[b];
    routing.k_per_sample.push_back(scheduled_k(config.k_schedule, r));
    routing.compute_cost += s * routing.k_per_sample.back();
  }
  routing.static_cost = input.num_samples() * s * config.k_schedule.k;
  const std::vector<Pass> passes = plan_passes(config, input, routing);

  // ec-softmax selects by per-token probabilities; EC-DLM by the raw logits.
  std::vector<float> probabilities;
  std::span<const float> keys = input.logits;
  const auto e = static_cast<std::size_t>(input.num_experts);
  if (config.variant == ExpertChoiceVariant::kSoftmax) {
    probabilities.resize(input.logits.size());
    for (std::int64_t t = 0; t < input.num_tokens; ++t) {
      softmax_row(input.row(t), std::span<float>(probabilities).subspan(t * e, e));
    }
    keys = probabilities;
  }

  ColumnSelector selector(input.num_experts);
  std::vector<Kept> kept(passes.size());
  for (std::size_t p = 0; p < passes.size(); ++p) {
    selector.start(passes[p].capacity, passes[p].begin);
    for (std::int64_t t = passes[p].begin; t < passes[p].end; ++t) selector.offer(keys.data() + t * e, t);
    kept[p].positions.reserve(static_cast<std::size_t>(input.num_experts * passes[p].capacity));
    kept[p].keys.reserve(kept[p].positions.capacity());
    for (std::int64_t j = 0; j < input.num_experts; ++j) selector.append_kept(j, kept[p]);
  }
  build_slots(passes, kept, routing);
  // ec-softmax: the selection key P[i][j] already is the gate.
  if (config.variant == ExpertChoiceVariant::kDlm) dlm_gates(config, routing);
  fill_statistics(routing);
  return routing;
}

}  // namespace eps::routing
