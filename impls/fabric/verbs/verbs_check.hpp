// Return-code checks for libibverbs and efadv calls (docs/architecture.md, house style rule 3).
//
// libibverbs reports failure in three shapes: most calls return 0 or the errno value (ibv_modify_qp,
// ibv_post_send, ibv_destroy_qp, ibv_query_port, efadv_query_device), a few return -1 and set errno,
// poll returns a negative value, and constructors return NULL with errno set (ibv_open_device,
// ibv_reg_mr, ibv_create_qp). `verbs_error` turns any of them into one kEnvironment status that names
// the call, the source file (base name) and line, and the errno text:
//   "ibv_modify_qp(qp, &attr, mask) failed at verbs_fabric.cpp:120: Invalid argument (errno 22)".
// `verbs_errno(rc, saved_errno)` picks the error number: rc itself when positive, else the errno saved
// right after the call; 0 when neither tells (the message then says "no errno reported").
//
// EPS_VERBS_CHECK(call): for calls returning an int, non-zero = failure.
// EPS_VERBS_ASSIGN_OR_RETURN(lhs, call): for calls returning a pointer, nullptr = failure.
// Both return the failed Status from the enclosing function (which returns Status or Result<T>).
#pragma once

#include <cerrno>

#include "reference/common/status.hpp"

namespace eps::fabric::verbs {

int verbs_errno(int rc, int saved_errno);
Status verbs_error(const char* call, int error_number, const char* file, int line);

}  // namespace eps::fabric::verbs

#define EPS_VERBS_CHECK(call)                                                                  \
  do {                                                                                         \
    errno = 0;                                                                                 \
    const int eps_verbs_rc_ = (call);                                                          \
    if (eps_verbs_rc_ != 0) {                                                                  \
      return ::eps::fabric::verbs::verbs_error(                                                \
          #call, ::eps::fabric::verbs::verbs_errno(eps_verbs_rc_, errno), __FILE__, __LINE__); \
    }                                                                                          \
  } while (0)

#define EPS_VERBS_ASSIGN_OR_RETURN(lhs, call) \
  EPS_VERBS_ASSIGN_OR_RETURN_IMPL(EPS_STATUS_CONCAT(eps_verbs_ptr_, __LINE__), lhs, call)
#define EPS_VERBS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, call)                                           \
  errno = 0;                                                                                      \
  auto tmp = (call);                                                                              \
  if (tmp == nullptr) return ::eps::fabric::verbs::verbs_error(#call, errno, __FILE__, __LINE__); \
  lhs = tmp
