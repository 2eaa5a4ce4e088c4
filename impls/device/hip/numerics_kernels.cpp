#include "impls/device/hip/numerics_kernels.hpp"

#include <unistd.h>

#include <array>

#include "impls/device/hip/hip_check.hpp"
#include "impls/device/hip/numerics_launch.hpp"
#include "reference/numerics/quant.hpp"

namespace eps::hip {
namespace {

Status check_pointer(std::string_view field, const void* pointer, bool empty) {
  if (pointer == nullptr && !empty) return invalid_argument(field, "must be a device pointer, got null");
  return Status();
}

}  // namespace

Status hip_error_status(hipError_t error, const char* call, const char* file, int line) {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host = {'?'};
  return Status(StatusCode::kEnvironment,
                fmt::format("HIP {} ({}) from {} at {}:{} on host {}", hipGetErrorName(error),
                            hipGetErrorString(error), call, file, line, host.data()));
}

Status fp8_quantize_per_token(const bf16* x, int tokens, int hidden, Fp8ScaleMode mode, std::uint8_t* codes,
                              float* scales, hipStream_t stream) {
  EPS_RETURN_IF_ERROR(check_fp8_shape(tokens, hidden));
  const bool empty = tokens == 0;
  EPS_RETURN_IF_ERROR(check_pointer("x", x, empty));
  EPS_RETURN_IF_ERROR(check_pointer("codes", codes, empty));
  EPS_RETURN_IF_ERROR(check_pointer("scales", scales, empty));
  EPS_HIP_CHECK(detail::launch_fp8_quantize(x, tokens, hidden, mode, codes, scales, stream));
  return Status();
}

Status fp8_dequantize_per_token(const std::uint8_t* codes, const float* scales, int tokens, int hidden,
                                float* out, hipStream_t stream) {
  EPS_RETURN_IF_ERROR(check_fp8_shape(tokens, hidden));
  const bool empty = tokens == 0;
  EPS_RETURN_IF_ERROR(check_pointer("codes", codes, empty));
  EPS_RETURN_IF_ERROR(check_pointer("scales", scales, empty));
  EPS_RETURN_IF_ERROR(check_pointer("out", out, empty));
  EPS_HIP_CHECK(detail::launch_fp8_dequantize(codes, scales, tokens, hidden, out, stream));
  return Status();
}

Status fill_stream_bits(std::uint64_t seed, data::StreamAddress address, std::uint32_t rows,
                        std::uint32_t cols, std::uint32_t* out, hipStream_t stream) {
  if (address.coord1 > data::kMaxCoord1) {
    return out_of_range("address.coord1", std::uint32_t{0}, data::kMaxCoord1, address.coord1);
  }
  EPS_RETURN_IF_ERROR(check_pointer("out", out, rows == 0 || cols == 0));
  EPS_HIP_CHECK(detail::launch_stream_bits(seed, address, rows, cols, out, stream));
  return Status();
}

}  // namespace eps::hip
