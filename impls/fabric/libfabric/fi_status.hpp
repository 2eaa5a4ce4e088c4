// libfabric return codes as epsuite Status (docs/architecture.md house style rule 3; docs/errors.md 10).
//
// `fi_status(rc, call, file, line)` is OK for rc >= 0 and otherwise a kEnvironment status
// "fi_mr_reg(...) failed at libfabric_fabric.cpp:120: Invalid argument (-22)" whose text comes from
// fi_strerror. EPS_FI_CHECK(call) evaluates a libfabric call once and returns that status from
// the enclosing function when it failed; every fi_* call of the libfabric fabric goes through it (or
// handles -FI_EAGAIN / -FI_EAVAIL explicitly first).
#pragma once

#include <cstdint>

#include "reference/common/status.hpp"

namespace eps::fabric::ofi {

Status fi_status(std::int64_t rc, const char* call, const char* file, int line);

}  // namespace eps::fabric::ofi

#define EPS_FI_CHECK(call)                                                                           \
  do {                                                                                               \
    const std::int64_t eps_fi_rc_ = static_cast<std::int64_t>(call);                                 \
    if (eps_fi_rc_ < 0) return ::eps::fabric::ofi::fi_status(eps_fi_rc_, #call, __FILE__, __LINE__); \
  } while (0)
