// Raw launchers of numerics_kernels.hip, shared between hipcc and the host compiler: no fmt, no Status.
// Each enqueues its kernel and returns hipGetLastError(). Arguments are already validated by the callers
// in numerics_kernels.cpp (the public interface is numerics_kernels.hpp).
#pragma once

#include <hip/hip_runtime_api.h>

#include <cstdint>

#include "reference/data/philox.hpp"
#include "reference/numerics/bf16.hpp"
#include "reference/numerics/quant_group.hpp"

namespace eps::hip::detail {

hipError_t launch_fp8_quantize(const bf16* x, int tokens, int hidden, Fp8ScaleMode mode, std::uint8_t* codes,
                               float* scales, hipStream_t stream);

hipError_t launch_fp8_dequantize(const std::uint8_t* codes, const float* scales, int tokens, int hidden,
                                 float* out, hipStream_t stream);

hipError_t launch_stream_bits(std::uint64_t seed, data::StreamAddress address, std::uint32_t rows,
                              std::uint32_t cols, std::uint32_t* out, hipStream_t stream);

}  // namespace eps::hip::detail
