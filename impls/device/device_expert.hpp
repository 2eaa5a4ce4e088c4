// A SwiGLU expert resident on a Device (docs/layer.md 4.1-4.2, docs/devices.md): the batch-invariant
// kernel of reference/expert/tree_kernel.hpp run as device kernels. Its outputs are bit-identical to the
// reference's `vectorized` expert kernel (TreeExpert) on every device and for every batch: the same 16-lane
// fma tree over the same zero-padded fp32 weights, the same gate and roundings.
//
// forward() is a sequence of kernels on the device's queue: widen x to fp32 (padded), a = W1·x and
// b = W3·x (tree_gemm), h = bf16(silu(a)·b) widened again (swiglu_gate), y = bf16(W2·h) (tree_gemm,
// round_bf16). The scratch buffers grow to the largest batch seen and are reused.
#pragma once

#include <cstdint>

#include "impls/device/device.hpp"
#include "reference/expert/swiglu.hpp"

namespace eps::device {

class DeviceExpert {
 public:
  // Uploads the weights (checked as validate_expert_weights does) as zero-padded fp32 rows.
  static Result<DeviceExpert> create(Device& device, const ExpertWeights& weights);

  const ExpertShape& shape() const { return shape_; }

  // y [rows, H] = the expert on x [rows, H]; both device memory of this device; rows may be 0. Enqueued on
  // the device; h_out [rows, F] (optional) receives the bf16 intermediate.
  Status forward(const bf16* x, std::int64_t rows, bf16* y, bf16* h_out = nullptr);

 private:
  DeviceExpert(Device& device, ExpertShape shape);
  Status reserve(std::int64_t rows);

  Device* device_;
  ExpertShape shape_;
  int hidden_len_;  // H rounded up to a multiple of 16
  int ffn_len_;     // F rounded up to a multiple of 16
  Buffer w1_, w3_, w2_;
  Buffer x_wide_, a_, b_, h_wide_, y_wide_;
  std::int64_t capacity_rows_ = 0;
};

}  // namespace eps::device
