#include "impls/device/device_expert.hpp"

#include "impls/device/kernels/kernel_bodies.hpp"

namespace eps::device {
namespace {

int padded(int n) { return (n + kTreeLanes - 1) / kTreeLanes * kTreeLanes; }

// A [rows, cols] bf16 host matrix as zero-padded fp32 rows of `len` on the device.
Result<Buffer> upload_widened(Device& device, const std::vector<bf16>& host, int rows, int cols, int len) {
  EPS_ASSIGN_OR_RETURN(Buffer narrow, device.allocate(host.size() * sizeof(bf16), MemoryKind::kDevice));
  EPS_RETURN_IF_ERROR(device.copy(narrow.data(), host.data(), host.size() * sizeof(bf16)));
  EPS_ASSIGN_OR_RETURN(Buffer wide, device.allocate(static_cast<std::size_t>(rows) * len * sizeof(float),
                                                    MemoryKind::kDevice));
  EPS_RETURN_IF_ERROR(
      device.run(WidenBf16Args{narrow.as<bf16>(), cols, rows, cols, wide.as<float>(), len, len}));
  EPS_RETURN_IF_ERROR(device.synchronize());  // `narrow` is freed on return
  return wide;
}

}  // namespace

DeviceExpert::DeviceExpert(Device& device, ExpertShape shape)
    : device_(&device), shape_(shape), hidden_len_(padded(shape.hidden)), ffn_len_(padded(shape.ffn)) {}

Result<DeviceExpert> DeviceExpert::create(Device& device, const ExpertWeights& weights) {
  EPS_RETURN_IF_ERROR(validate_expert_weights(weights));
  DeviceExpert expert(device, weights.shape);
  const int h = weights.shape.hidden;
  const int f = weights.shape.ffn;
  EPS_ASSIGN_OR_RETURN(expert.w1_, upload_widened(device, weights.w1, f, h, expert.hidden_len_));
  EPS_ASSIGN_OR_RETURN(expert.w3_, upload_widened(device, weights.w3, f, h, expert.hidden_len_));
  EPS_ASSIGN_OR_RETURN(expert.w2_, upload_widened(device, weights.w2, h, f, expert.ffn_len_));
  return expert;
}

Status DeviceExpert::reserve(std::int64_t rows) {
  if (rows <= capacity_rows_) return Status();
  const auto n = static_cast<std::size_t>(rows);
  const auto alloc = [&](Buffer& buffer, std::size_t floats) -> Status {
    buffer.reset();
    EPS_ASSIGN_OR_RETURN(buffer, device_->allocate(floats * sizeof(float), MemoryKind::kDevice));
    return Status();
  };
  EPS_RETURN_IF_ERROR(alloc(x_wide_, n * hidden_len_));
  EPS_RETURN_IF_ERROR(alloc(a_, n * shape_.ffn));
  EPS_RETURN_IF_ERROR(alloc(b_, n * shape_.ffn));
  EPS_RETURN_IF_ERROR(alloc(h_wide_, n * ffn_len_));
  EPS_RETURN_IF_ERROR(alloc(y_wide_, n * shape_.hidden));
  // The gate writes the first F columns of h; the padding stays +0.0f, as the tree expects.
  EPS_RETURN_IF_ERROR(device_->fill(h_wide_.data(), 0, h_wide_.bytes()));
  capacity_rows_ = rows;
  return Status();
}

Status DeviceExpert::forward(const bf16* x, std::int64_t rows, bf16* y, bf16* h_out) {
  if (rows < 0) return invalid_argument("rows", "must be >= 0, got {}", rows);
  if (rows == 0) return Status();
  EPS_RETURN_IF_ERROR(reserve(rows));
  const int h = shape_.hidden;
  const int f = shape_.ffn;
  float* xw = x_wide_.as<float>();
  EPS_RETURN_IF_ERROR(device_->run(WidenBf16Args{x, h, rows, h, xw, hidden_len_, hidden_len_}));
  EPS_RETURN_IF_ERROR(device_->run(
      TreeGemmArgs{xw, rows, hidden_len_, w1_.as<float>(), f, hidden_len_, hidden_len_, a_.as<float>(), f}));
  EPS_RETURN_IF_ERROR(device_->run(
      TreeGemmArgs{xw, rows, hidden_len_, w3_.as<float>(), f, hidden_len_, hidden_len_, b_.as<float>(), f}));
  EPS_RETURN_IF_ERROR(device_->run(
      SwigluGateArgs{a_.as<float>(), b_.as<float>(), f, rows, f, h_wide_.as<float>(), ffn_len_, h_out, f}));
  EPS_RETURN_IF_ERROR(device_->run(TreeGemmArgs{h_wide_.as<float>(), rows, ffn_len_, w2_.as<float>(), h,
                                                ffn_len_, ffn_len_, y_wide_.as<float>(), h}));
  return device_->run(RoundBf16Args{y_wide_.as<float>(), h, rows, h, y, h});
}

}  // namespace eps::device
