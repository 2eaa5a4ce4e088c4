// EPS_CUDA_CHECK: every CUDA runtime return code in epsuite goes through it (docs/architecture.md, house
// style rule 3). On failure the enclosing function returns a kEnvironment Status naming the CUDA error, the
// failed call, file:line and the host: "CUDA cudaErrorInvalidValue (invalid argument) from
// cudaMemcpyAsync(...) at impls/device/cuda/x.cpp:42 on host gpu07". Host code only (compiled by the C++
// compiler, not nvcc, because fmt's compile-time format strings do not build under nvcc).
#pragma once

#include <cuda_runtime_api.h>

#include "reference/common/status.hpp"

namespace eps::cuda {

Status cuda_error_status(cudaError_t error, const char* call, const char* file, int line);

}  // namespace eps::cuda

#define EPS_CUDA_CHECK(expr)                                                             \
  do {                                                                                   \
    const cudaError_t eps_cuda_error_ = (expr);                                          \
    if (eps_cuda_error_ != cudaSuccess) {                                                \
      return ::eps::cuda::cuda_error_status(eps_cuda_error_, #expr, __FILE__, __LINE__); \
    }                                                                                    \
  } while (0)
