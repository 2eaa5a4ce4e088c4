#include "reference/routing/schedule.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "reference/numerics/transcendental.hpp"

namespace eps::routing {
namespace {

constexpr std::array<std::string_view, 8> kNames = {
    "static",         "linear", "linear_reverse", "cosine",
    "cosine_reverse", "bell",   "bell_gaussian",  "bell_gaussian_reverse"};

float clamp01(float v) { return std::min(std::max(v, 0.0f), 1.0f); }

float bell_gaussian(float r, float sigma) {
  const float two_var = 2.0f * (sigma * sigma);
  const float e0 = portable_exp(-0.25f / two_var);
  const float d = r - 0.5f;
  return (portable_exp(-(d * d) / two_var) - e0) / (1.0f - e0);
}

// docs/routing.md 3.4 cosine evaluation order: s = 0.5·(1 + cos(π·(1 − ρ))), ρ = r for `cosine` and 1 − r for
// `cosine_reverse`. |portable_cos| <= 1, so s is in [0, 1] without a clamp.
float cosine_of_rho(float rho) {
  constexpr float kPi = 0x1.921fb6p1f;  // π rounded to fp32
  return 0.5f * (1.0f + portable_cos(kPi * (1.0f - rho)));
}

}  // namespace

std::string_view schedule_name(ScheduleKind kind) { return kNames[static_cast<std::size_t>(kind)]; }

std::span<const std::string_view> schedule_names() { return kNames; }

bool schedule_needs_sigma(ScheduleKind kind) {
  return kind == ScheduleKind::kBellGaussian || kind == ScheduleKind::kBellGaussianReverse;
}

Result<Schedule> parse_schedule(std::string_view text, std::string_view field) {
  const std::size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  const auto it = std::find(kNames.begin(), kNames.end(), name);
  if (it == kNames.end()) {
    return invalid_argument(field, "must be one of {{{}}} (gaussian ones as name:sigma), got \"{}\"",
                            fmt::join(kNames, ", "), text);
  }
  Schedule schedule;
  schedule.kind = static_cast<ScheduleKind>(it - kNames.begin());
  if (!schedule_needs_sigma(schedule.kind)) {
    if (colon != std::string_view::npos) {
      return invalid_argument(field, "schedule \"{}\" takes no \":sigma\" suffix, got \"{}\"", name, text);
    }
    return schedule;
  }
  if (colon == std::string_view::npos) return schedule;  // sigma given elsewhere (validated later)
  const std::string_view number = text.substr(colon + 1);
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), schedule.sigma);
  if (error != std::errc() || end != number.data() + number.size() || !std::isfinite(schedule.sigma) ||
      !(schedule.sigma > 0.0f)) {
    return invalid_argument(field, "sigma after ':' must be a finite number > 0, got \"{}\"", number);
  }
  return schedule;
}

float schedule_value(const Schedule& schedule, float r) {
  switch (schedule.kind) {
    case ScheduleKind::kStatic:
      return 0.0f;
    case ScheduleKind::kLinear:
      return clamp01(r);
    case ScheduleKind::kLinearReverse:
      return clamp01(1.0f - r);
    case ScheduleKind::kCosine:
      return cosine_of_rho(r);
    case ScheduleKind::kCosineReverse:
      return cosine_of_rho(1.0f - r);
    case ScheduleKind::kBell: {
      const float d = r - 0.5f;
      return clamp01(1.0f - 4.0f * (d * d));
    }
    case ScheduleKind::kBellGaussian:
      return clamp01(bell_gaussian(r, schedule.sigma));
    case ScheduleKind::kBellGaussianReverse:
      return clamp01(1.0f - clamp01(bell_gaussian(r, schedule.sigma)));
  }
  return 0.0f;
}

float round_half_even(float x) {
  const float lower = std::floor(x);
  const float diff = x - lower;  // exact for x >= 0 (the fraction bits of x)
  if (diff > 0.5f) return lower + 1.0f;
  if (diff < 0.5f) return lower;
  return std::fmod(lower, 2.0f) == 0.0f ? lower : lower + 1.0f;
}

Status validate_k_schedule(const KSchedule& k_schedule, std::int64_t num_experts, std::string_view prefix) {
  const auto name = [prefix](std::string_view field) { return fmt::format("{}{}", prefix, field); };
  const std::int64_t one = 1;
  if (k_schedule.k < 1 || k_schedule.k > num_experts) {
    return out_of_range(name("k"), one, num_experts, k_schedule.k);
  }
  if (k_schedule.schedule.kind == ScheduleKind::kStatic) return Status();
  if (k_schedule.k_min < 1 || k_schedule.k_min > num_experts) {
    return out_of_range(name("k_min"), one, num_experts, k_schedule.k_min);
  }
  if (k_schedule.k_max < 1 || k_schedule.k_max > num_experts) {
    return out_of_range(name("k_max"), one, num_experts, k_schedule.k_max);
  }
  if (k_schedule.k_min > k_schedule.k_max) {
    return invalid_argument(name("k_min"), "must be <= {}, got {} > {}", name("k_max"), k_schedule.k_min,
                            k_schedule.k_max);
  }
  const float sigma = k_schedule.schedule.sigma;
  if (!schedule_needs_sigma(k_schedule.schedule.kind)) return Status();
  if (sigma == 0.0f) {
    return invalid_argument(name("sigma"), "required (> 0) for schedule {} (or write \"{}:sigma\")",
                            schedule_name(k_schedule.schedule.kind), schedule_name(k_schedule.schedule.kind));
  }
  if (!(std::isfinite(sigma) && sigma > 0.0f)) {
    return invalid_argument(name("sigma"), "must be a finite number > 0, got {}", sigma);
  }
  return Status();
}

std::int64_t scheduled_k(const KSchedule& k_schedule, float mask_ratio) {
  if (k_schedule.schedule.kind == ScheduleKind::kStatic) return k_schedule.k;
  const float s = schedule_value(k_schedule.schedule, mask_ratio);
  const float span = static_cast<float>(k_schedule.k_max - k_schedule.k_min);
  const float k = round_half_even(static_cast<float>(k_schedule.k_min) + span * s);
  const auto k_int = static_cast<std::int64_t>(k);
  return std::clamp(k_int, k_schedule.k_min, k_schedule.k_max);
}

}  // namespace eps::routing
