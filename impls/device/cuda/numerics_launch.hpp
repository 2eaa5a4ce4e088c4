// Raw launchers of numerics_kernels.cu, shared between nvcc and the host compiler: no fmt, no Status.
// Each enqueues its kernel and returns cudaGetLastError(). Arguments are already validated by the
// callers in numerics_kernels.cpp (the public interface is numerics_kernels.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "reference/data/philox.hpp"
#include "reference/numerics/bf16.hpp"
#include "reference/numerics/quant_group.hpp"

namespace eps::cuda::detail {

cudaError_t launch_fp8_quantize(const bf16* x, int tokens, int hidden, Fp8ScaleMode mode, std::uint8_t* codes,
                                float* scales, cudaStream_t stream);

cudaError_t launch_fp8_dequantize(const std::uint8_t* codes, const float* scales, int tokens, int hidden,
                                  float* out, cudaStream_t stream);

cudaError_t launch_stream_bits(std::uint64_t seed, data::StreamAddress address, std::uint32_t rows,
                               std::uint32_t cols, std::uint32_t* out, cudaStream_t stream);

}  // namespace eps::cuda::detail
