// HIP kernels of the numerics (docs/numerics.md 1.2, docs/numerics.md 2.1), built for gfx90a
// (EPS_HIP_ARCHITECTURES) into eps_device_hip. The kernels run the EPS_HD bodies of
// reference/numerics/quant_group.hpp and reference/data/philox.hpp, so their results are bit-identical to the
// host references (which the CPU tests cover).
//
// All pointers are device memory; work is enqueued on `stream` and not waited for. Arguments are checked
// like the host reference (check_fp8_shape: "hidden: must be a multiple of 128 for fp8, got 100"; null
// pointers with a non-empty shape); every HIP return code is checked (EPS_HIP_CHECK), so a launch failure
// comes back as a kEnvironment Status.
#pragma once

#include <hip/hip_runtime_api.h>

#include <cstdint>

#include "reference/common/status.hpp"
#include "reference/data/philox.hpp"
#include "reference/numerics/bf16.hpp"
#include "reference/numerics/quant_group.hpp"

namespace eps::hip {

// x [tokens, hidden] bf16 -> codes [tokens, hidden] fp8 e4m3fn, scales [tokens, hidden / 128] fp32,
// exactly quantize_fp8_per_token (reference/numerics/quant.hpp). One thread block per token row, one
// wavefront per 128-channel group.
Status fp8_quantize_per_token(const bf16* x, int tokens, int hidden, Fp8ScaleMode mode, std::uint8_t* codes,
                              float* scales, hipStream_t stream);

// out[t, c] = fp32(codes[t, c]) * scales[t, c / 128], exactly dequantize_fp8_per_token.
Status fp8_dequantize_per_token(const std::uint8_t* codes, const float* scales, int tokens, int hidden,
                                float* out, hipStream_t stream);

// out[r * cols + c] = data::stream_bits(seed, address, r, c) for a [rows, cols] block of a data stream
// (docs/numerics.md 2.1): the random words any generator maps to values.
Status fill_stream_bits(std::uint64_t seed, data::StreamAddress address, std::uint32_t rows,
                        std::uint32_t cols, std::uint32_t* out, hipStream_t stream);

}  // namespace eps::hip
