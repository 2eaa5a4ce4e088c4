// silu and the SwiGLU gate of docs/layer.md 4.1 as EPS_HD bodies, shared by the reference kernels and the
// device kernels (impls/device), so that every device evaluates them in the same fp32 operation order.
#pragma once

#include "reference/common/host_device.hpp"
#include "reference/numerics/bf16.hpp"
#include "reference/numerics/transcendental.hpp"

namespace eps {

// silu(a) = a / (1 + exp(-a)) evaluated in fp32 exactly in that operation order, with the portable exp of
// docs/numerics.md 1.5. Edge values follow from the formula: silu(±0) = ±0, silu(+inf) = +inf,
// silu(-inf) = NaN (-inf / inf), silu(a) = -0 for a < about -88.7 where exp(-a) overflows to +inf.
EPS_HD inline float silu_fp32(float a) { return a / (1.0f + portable_exp(-a)); }

// h = bf16(silu(a) * b), the product rounded once in fp32 and then to bf16 (docs/layer.md 4.1).
EPS_HD inline bf16 swiglu_gate(float a, float b) { return bf16::from_float(silu_fp32(a) * b); }

}  // namespace eps
