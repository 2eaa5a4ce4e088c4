// EPS_HIP_CHECK: every HIP runtime return code in epsuite goes through it (docs/architecture.md, house style
// rule 3). On failure the enclosing function returns a kEnvironment Status naming the HIP error, the failed
// call, file:line and the host: "HIP hipErrorInvalidValue (invalid argument) from hipMemcpyAsync(...) at
// impls/device/hip/x.cpp:42 on host mi250-03". Host code only (compiled by the C++ compiler).
#pragma once

#include <hip/hip_runtime_api.h>

#include "reference/common/status.hpp"

namespace eps::hip {

Status hip_error_status(hipError_t error, const char* call, const char* file, int line);

}  // namespace eps::hip

#define EPS_HIP_CHECK(expr)                                                           \
  do {                                                                                \
    const hipError_t eps_hip_error_ = (expr);                                         \
    if (eps_hip_error_ != hipSuccess) {                                               \
      return ::eps::hip::hip_error_status(eps_hip_error_, #expr, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)
