// Timestep-dependent capacity (docs/routing.md 3.4): the per-sample k_b of expert choice from the sample's
// mask ratio.
//
//   k_b = clamp(round_half_even(k_min + (k_max − k_min)·s(r_b)), k_min, k_max)
//
// evaluated in fp32 in exactly that operation order: float(k_max − k_min) · s, then float(k_min) + that,
// then round half to even, then clamp. `static` ignores r_b and gives k_b = k. Schedules s(r), all fp32 with
// the portable exp and cos of reference/numerics/transcendental.hpp (docs/numerics.md 1.5, never libm):
//   static                   -            (k_b = k)
//   linear                   clamp(r, 0, 1)
//   linear_reverse           clamp(1 − r, 0, 1)
//   cosine                   0.5·(1 + cos(π·(1 − ρ))) with ρ = r       (docs/routing.md 3.4 evaluation order:
//   cosine_reverse           0.5·(1 + cos(π·(1 − ρ))) with ρ = 1 − r    exactly these operations, π = fp32 π)
//   bell                     clamp(1 − 4·(r − 0.5)², 0, 1)          ((r − 0.5)² computed as d·d)
//   bell_gaussian:σ          clamp((exp(−(d·d) / (2·(σ·σ))) − e0) / (1 − e0), 0, 1),  e0 = exp(−0.25 /
//   (2·(σ·σ))) bell_gaussian_reverse:σ  1 − bell_gaussian:σ
// Compute cost of a batch: Σ_b S·k_b, reported next to the static cost B·S·k.
//
// Contract of `KSchedule` (checked by `validate_k_schedule`, which prefixes every field with `prefix`,
// e.g. "router."): k in [1, E]; for a non-static schedule k_min in [1, E], k_max in [1, E],
// k_min <= k_max ("k_min: must be <= k_max, got 9 > 8"); for the gaussian schedules sigma finite and > 0
// ("sigma: required (> 0) for schedule bell_gaussian ..." when it is 0).
// With k_b <= E, the expert-choice capacity c_b = max(floor(S·k_b/E), 1) never exceeds S.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "reference/common/status.hpp"

namespace eps::routing {

enum class ScheduleKind {
  kStatic,
  kLinear,
  kLinearReverse,
  kCosine,
  kCosineReverse,
  kBell,
  kBellGaussian,
  kBellGaussianReverse,
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::kStatic;
  float sigma = 0.0f;  // bell_gaussian and bell_gaussian_reverse only
};

// "static", "linear", "linear_reverse", "cosine", "cosine_reverse", "bell", "bell_gaussian[:σ]",
// "bell_gaussian_reverse[:σ]" (σ a decimal number > 0; the ":σ" suffix is only allowed for the gaussian
// schedules; without it sigma stays 0 and must be set before validate_k_schedule). Errors name `field`.
Result<Schedule> parse_schedule(std::string_view text, std::string_view field = "schedule");
// The name without the ":σ" suffix.
std::string_view schedule_name(ScheduleKind kind);
// Every accepted name without the ":σ" suffix, in the order above.
std::span<const std::string_view> schedule_names();
bool schedule_needs_sigma(ScheduleKind kind);

// s(r) in [0, 1] for r in [0, 1] (not used for static).
float schedule_value(const Schedule& schedule, float r);

// Round half to even in fp32 for x >= 0, independent of the current rounding mode.
float round_half_even(float x);

struct KSchedule {
  Schedule schedule;
  std::int64_t k = 1;      // the static k: k_b for `static`, and the k of the static cost
  std::int64_t k_min = 1;  // non-static schedules only
  std::int64_t k_max = 1;
};

Status validate_k_schedule(const KSchedule& k_schedule, std::int64_t num_experts,
                           std::string_view prefix = "");

// k_b for a sample with mask ratio r (docs/routing.md 3.4).
std::int64_t scheduled_k(const KSchedule& k_schedule, float mask_ratio);

}  // namespace eps::routing
