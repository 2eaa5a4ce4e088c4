#include "impls/fabric/libfabric/fi_status.hpp"

#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

#include "impls/fabric/libfabric/fi_api.hpp"

namespace eps::fabric::ofi {
namespace {

TEST(FiStatus, NonNegativeReturnCodesAreOk) {
  EXPECT_TRUE(fi_status(0, "fi_enable(ep)", "x.cpp", 1).ok());
  EXPECT_TRUE(fi_status(3, "fi_cq_read(cq, e, 8)", "x.cpp", 1).ok());
}

TEST(FiStatus, NegativeCodeNamesCallFileLineAndText) {
  const Status s = fi_status(-FI_EAGAIN, "fi_writemsg(ep, &msg, flags)", "/a/b/libfabric_fabric.cpp", 42);
  EXPECT_EQ(s.code(), StatusCode::kEnvironment);
  // FI_EAGAIN is errno EAGAIN (11 on Linux), whose glibc text is "Resource temporarily unavailable".
  EXPECT_EQ(s.message(),
            "fi_writemsg(ep, &msg, flags) failed at libfabric_fabric.cpp:42: Resource temporarily "
            "unavailable (-11)");
}

TEST(FiStatus, LibfabricSpecificCodesUseFiStrerror) {
  // FI_EAVAIL lies above FI_ERRNO_OFFSET (256): its text comes from libfabric's own table.
  const Result<const FiApi*> fi = fi_api();
  ASSERT_TRUE(fi.ok()) << fi.status().message();
  const Status s = fi_status(-FI_EAVAIL, "fi_cq_read", "f.cpp", 7);
  EXPECT_EQ(s.message(),
            fmt::format("fi_cq_read failed at f.cpp:7: {} (-{})", (*fi)->strerror(FI_EAVAIL), FI_EAVAIL));
  EXPECT_NE(std::string((*fi)->strerror(FI_EAVAIL)).find("available"), std::string::npos);
}

Status returns_through_macro(long rc, int* reached) {
  EPS_FI_CHECK(rc);
  *reached = 1;
  return Status();
}

TEST(FiStatus, MacroReturnsOnlyOnFailure) {
  int reached = 0;
  EXPECT_TRUE(returns_through_macro(0, &reached).ok());
  EXPECT_EQ(reached, 1);
  reached = 0;
  const Status s = returns_through_macro(-FI_EINVAL, &reached);
  EXPECT_EQ(reached, 0);
  EXPECT_EQ(s.code(), StatusCode::kEnvironment);
  EXPECT_NE(s.message().find("rc failed at fi_status_test.cpp:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Invalid argument (-22)"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace eps::fabric::ofi
