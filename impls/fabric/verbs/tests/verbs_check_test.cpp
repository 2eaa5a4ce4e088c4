// verbs_check.hpp: every libibverbs failure shape becomes one kEnvironment status naming call, file, line
// and errno (docs/architecture.md rule 3).
#include "impls/fabric/verbs/verbs_check.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace eps::fabric::verbs {
namespace {

// Stand-ins for libibverbs calls: return `rc` with errno set to `err`, as the real calls do.
int fake_call(int rc, int err) {
  errno = err;
  return rc;
}
int* fake_constructor(int* value, int err) {
  errno = err;
  return value;
}

Status checked_call(int rc, int err) {
  EPS_VERBS_CHECK(fake_call(rc, err));
  return Status();
}

Result<int> checked_constructor(int* value, int err) {
  EPS_VERBS_ASSIGN_OR_RETURN(int* p, fake_constructor(value, err));
  return *p;
}

TEST(VerbsCheck, ErrnoComesFromPositiveReturnCodeThenErrno) {
  EXPECT_EQ(verbs_errno(22, 0), 22);   // ibv_modify_qp style: the errno value is returned
  EXPECT_EQ(verbs_errno(22, 5), 22);   // ... and wins over a stale errno
  EXPECT_EQ(verbs_errno(-1, 12), 12);  // -1 plus errno
  EXPECT_EQ(verbs_errno(-1, 0), 0);    // nothing known
}

TEST(VerbsCheck, MessageNamesCallBaseFileLineAndErrno) {
  const Status s =
      verbs_error("ibv_modify_qp(qp, &attr, mask)", EINVAL, "/src/impls/fabric/verbs/verbs_fabric.cpp", 120);
  EXPECT_EQ(s.code(), StatusCode::kEnvironment);
  EXPECT_EQ(s.message(), std::string("ibv_modify_qp(qp, &attr, mask) failed at verbs_fabric.cpp:120: ") +
                             std::strerror(EINVAL) + " (errno 22)");
  EXPECT_EQ(verbs_error("ibv_poll_cq", 0, "x.cpp", 7).message(),
            "ibv_poll_cq failed at x.cpp:7: no errno reported");
}

TEST(VerbsCheck, ReturnIfErrorPassesZeroAndReportsFailures) {
  EXPECT_TRUE(checked_call(0, EIO).ok());  // errno is ignored when the call succeeded
  const Status direct = checked_call(ENOMEM, 0);
  EXPECT_EQ(direct.code(), StatusCode::kEnvironment);
  EXPECT_NE(direct.message().find("fake_call(rc, err) failed at verbs_check_test.cpp:"), std::string::npos)
      << direct.message();
  EXPECT_NE(direct.message().find("(errno 12)"), std::string::npos) << direct.message();
  const Status via_errno = checked_call(-1, EAGAIN);
  EXPECT_NE(via_errno.message().find("(errno 11)"), std::string::npos) << via_errno.message();
}

TEST(VerbsCheck, AssignOrReturnBindsPointerOrReportsNull) {
  int value = 42;
  const Result<int> ok = checked_constructor(&value, 0);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 42);
  const Result<int> failed = checked_constructor(nullptr, ENODEV);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kEnvironment);
  EXPECT_NE(failed.status().message().find("fake_constructor(value, err) failed"), std::string::npos);
  EXPECT_NE(failed.status().message().find("(errno 19)"), std::string::npos) << failed.status().message();
}

}  // namespace
}  // namespace eps::fabric::verbs
