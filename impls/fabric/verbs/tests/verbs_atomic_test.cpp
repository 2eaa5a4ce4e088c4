// verbs_atomic.hpp: when the verbs fabric has remote atomics and why not, the access flags they need, and the
// fetch-and-add work request (docs/fabrics.md 6.1), without an RDMA device.
#include "impls/fabric/verbs/verbs_atomic.hpp"

#include <string>

#include <gtest/gtest.h>

#include "impls/fabric/verbs/verbs_setup.hpp"

namespace eps::fabric::verbs {
namespace {

TEST(VerbsAtomic, RcHasAtomicsWhenTheDeviceReportsAnyAtomicCapability) {
  EXPECT_TRUE(atomic_support("verbs:rc", false, IBV_ATOMIC_HCA, "mlx5_0").ok());
  EXPECT_TRUE(atomic_support("verbs:rc", false, IBV_ATOMIC_GLOB, "mlx5_0").ok());
  const Status none = atomic_support("verbs:rc", false, IBV_ATOMIC_NONE, "siw0");
  EXPECT_EQ(none.code(), StatusCode::kUnavailable);
  EXPECT_EQ(
      none.message(),
      "no remote atomics on verbs:rc: device siw0 reports atomic_cap IBV_ATOMIC_NONE (no RDMA atomics)");
}

TEST(VerbsAtomic, EfaSrdHasNoAtomicsWhateverTheDeviceSays) {
  const Status efa = atomic_support("verbs:efa", true, IBV_ATOMIC_HCA, "rdmap0s6");
  EXPECT_EQ(efa.code(), StatusCode::kUnavailable);
  EXPECT_EQ(
      efa.message(),
      "no remote atomics on verbs:efa: EFA SRD has RDMA write and read but no remote atomic operations");
}

TEST(VerbsAtomic, RemoteAtomicAccessOnlyWithAtomics) {
  EXPECT_EQ(region_access(false), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(region_access(true), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  const LocalPort port{1, IBV_LINK_LAYER_INFINIBAND, IBV_MTU_4096, 0};
  EXPECT_EQ(rc_init(port).attr.qp_access_flags,
            static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(
      rc_init(port, true).attr.qp_access_flags,
      static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC));
}

TEST(VerbsAtomic, FetchAndAddRequestAddsTheValueAtTheRemoteWord) {
  ibv_sge result{0x1000, 8, 0x77};
  const ibv_send_wr wr =
      fetch_add_request(12, 0xdead'0000'0008ull, 0x4242, 0xffff'ffff'ffff'fffbull, &result);
  EXPECT_EQ(wr.wr_id, 12u);
  EXPECT_EQ(wr.opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
  EXPECT_EQ(wr.send_flags, static_cast<unsigned>(IBV_SEND_SIGNALED));
  EXPECT_EQ(wr.sg_list, &result);
  EXPECT_EQ(wr.num_sge, 1);
  EXPECT_EQ(wr.wr.atomic.remote_addr, 0xdead'0000'0008ull);
  EXPECT_EQ(wr.wr.atomic.rkey, 0x4242u);
  EXPECT_EQ(wr.wr.atomic.compare_add, 0xffff'ffff'ffff'fffbull);  // adding -5 modulo 2^64
  EXPECT_EQ(wr.wr.atomic.swap, 0u);
  EXPECT_EQ(wr.next, nullptr);
}

}  // namespace
}  // namespace eps::fabric::verbs
