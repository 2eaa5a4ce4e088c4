#include <hip/hip_runtime.h>

#include <cstddef>
#include <cstdint>

#include "impls/device/hip/numerics_launch.hpp"

namespace eps::hip::detail {
namespace {

// CDNA GPUs (gfx90a, gfx94x) run 64-lane wavefronts; the host pass only needs a placeholder.
#if defined(__AMDGCN_WAVEFRONT_SIZE)
constexpr int kWaveSize = __AMDGCN_WAVEFRONT_SIZE;
#else
constexpr int kWaveSize = 64;
#endif
constexpr int kQuantizeThreads = 256;
constexpr int kValuesPerLane = kFp8GroupSize / kWaveSize;
constexpr int kElementwiseThreads = 256;

// Wavefront w of block t quantizes groups w, w + 4, ... of row t. Lane l holds channels
// [l * kValuesPerLane, (l + 1) * kValuesPerLane) of the group; the butterfly max gives every lane the
// group's amax bits (max is exact and order-free, so this equals the sequential loop of
// fp8_quantize_group), then each lane quantizes its own values.
__global__ void fp8_quantize_kernel(const bf16* __restrict__ x, int hidden, Fp8ScaleMode mode,
                                    std::uint8_t* __restrict__ codes, float* __restrict__ scales) {
  const int groups = hidden / kFp8GroupSize;
  const std::size_t row = blockIdx.x;
  const int lane = static_cast<int>(threadIdx.x) % kWaveSize;
  for (int g = static_cast<int>(threadIdx.x) / kWaveSize; g < groups; g += kQuantizeThreads / kWaveSize) {
    const std::size_t base =
        row * hidden + static_cast<std::size_t>(g) * kFp8GroupSize + lane * kValuesPerLane;
    bf16 v[kValuesPerLane];
    int max_abs_bits = 0;
    for (int k = 0; k < kValuesPerLane; ++k) {
      v[k] = x[base + k];
      max_abs_bits = max(max_abs_bits, static_cast<int>(bf16_abs_bits_for_amax(v[k].bits)));
    }
    for (int offset = kWaveSize / 2; offset > 0; offset /= 2) {
      max_abs_bits = max(max_abs_bits, __shfl_xor(max_abs_bits, offset, kWaveSize));
    }
    const Fp8GroupScale s = fp8_group_scale(fp8_group_amax(static_cast<std::int16_t>(max_abs_bits)), mode);
    for (int k = 0; k < kValuesPerLane; ++k)
      codes[base + k] = fp8_quantize_value(v[k].to_float(), s.multiplier);
    if (lane == 0) scales[row * groups + g] = s.scale;
  }
}

__global__ void fp8_dequantize_kernel(const std::uint8_t* __restrict__ codes,
                                      const float* __restrict__ scales, std::size_t values,
                                      float* __restrict__ out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < values;
       i += stride) {
    out[i] = fp8_dequantize_value(codes[i], scales[i / kFp8GroupSize]);
  }
}

__global__ void stream_bits_kernel(std::uint64_t seed, data::StreamAddress address, std::uint32_t cols,
                                   std::size_t values, std::uint32_t* __restrict__ out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < values;
       i += stride) {
    out[i] = data::stream_bits(seed, address, static_cast<std::uint32_t>(i / cols),
                               static_cast<std::uint32_t>(i % cols));
  }
}

// Enough blocks to cover `values` once, capped; the kernels stride over the rest.
unsigned elementwise_blocks(std::size_t values) {
  const std::size_t blocks = (values + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

}  // namespace

hipError_t launch_fp8_quantize(const bf16* x, int tokens, int hidden, Fp8ScaleMode mode, std::uint8_t* codes,
                               float* scales, hipStream_t stream) {
  if (tokens == 0) return hipSuccess;
  fp8_quantize_kernel<<<tokens, kQuantizeThreads, 0, stream>>>(x, hidden, mode, codes, scales);
  return hipGetLastError();
}

hipError_t launch_fp8_dequantize(const std::uint8_t* codes, const float* scales, int tokens, int hidden,
                                 float* out, hipStream_t stream) {
  const std::size_t values = static_cast<std::size_t>(tokens) * hidden;
  if (values == 0) return hipSuccess;
  fp8_dequantize_kernel<<<elementwise_blocks(values), kElementwiseThreads, 0, stream>>>(codes, scales, values,
                                                                                        out);
  return hipGetLastError();
}

hipError_t launch_stream_bits(std::uint64_t seed, data::StreamAddress address, std::uint32_t rows,
                              std::uint32_t cols, std::uint32_t* out, hipStream_t stream) {
  const std::size_t values = static_cast<std::size_t>(rows) * cols;
  if (values == 0) return hipSuccess;
  stream_bits_kernel<<<elementwise_blocks(values), kElementwiseThreads, 0, stream>>>(seed, address, cols,
                                                                                     values, out);
  return hipGetLastError();
}

}  // namespace eps::hip::detail
