// The run-time libibverbs/libefa loader (verbs_api.hpp): the real libraries here, and the errors of a
// missing library or symbol. None of it needs an RDMA device.
#include "impls/fabric/verbs/verbs_api.hpp"

#include <gtest/gtest.h>

#include <string>

namespace eps::fabric::verbs {
namespace {

TEST(VerbsApi, LoadsLibibverbsWithEverySymbol) {
  const Result<const VerbsApi*> loaded = verbs_api();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const VerbsApi& ibv = **loaded;
  EXPECT_NE(ibv.get_device_list, nullptr);
  EXPECT_NE(ibv.free_device_list, nullptr);
  EXPECT_NE(ibv.get_device_name, nullptr);
  EXPECT_NE(ibv.open_device, nullptr);
  EXPECT_NE(ibv.close_device, nullptr);
  EXPECT_NE(ibv.query_device, nullptr);
  EXPECT_NE(ibv.query_port_compat, nullptr);
  EXPECT_NE(ibv.query_gid, nullptr);
  EXPECT_NE(ibv.alloc_pd, nullptr);
  EXPECT_NE(ibv.dealloc_pd, nullptr);
  EXPECT_NE(ibv.reg_mr, nullptr);
  EXPECT_NE(ibv.dereg_mr, nullptr);
  EXPECT_NE(ibv.create_cq, nullptr);
  EXPECT_NE(ibv.destroy_cq, nullptr);
  EXPECT_NE(ibv.create_qp, nullptr);
  EXPECT_NE(ibv.destroy_qp, nullptr);
  EXPECT_NE(ibv.modify_qp, nullptr);
  EXPECT_NE(ibv.qp_to_qp_ex, nullptr);
  EXPECT_NE(ibv.create_ah, nullptr);
  EXPECT_NE(ibv.destroy_ah, nullptr);
  EXPECT_NE(ibv.port_state_str, nullptr);
  EXPECT_NE(ibv.wc_status_str, nullptr);
  // Two calls that need no device: the text tables.
  EXPECT_STREQ(ibv.wc_status_str(IBV_WC_SUCCESS), "success");
  EXPECT_STREQ(ibv.port_state_str(IBV_PORT_ACTIVE), "active");
  // The device list works with or without devices (NULL only where the kernel has no RDMA subsystem).
  int count = -1;
  if (ibv_device** list = ibv.get_device_list(&count)) {
    EXPECT_GE(count, 0);
    ibv.free_device_list(list);
  }
}

TEST(VerbsApi, LoadsOnce) {
  const Result<const VerbsApi*> first = verbs_api();
  const Result<const VerbsApi*> second = verbs_api();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

TEST(VerbsApi, MissingLibraryIsAnEnvironmentErrorNamingIt) {
  const Result<VerbsApi> api = load_verbs_api("libeps-no-such-verbs.so.1");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(api.status().message().rfind("libeps-no-such-verbs.so.1 cannot be loaded: ", 0), 0u)
      << api.status().message();
}

TEST(VerbsApi, MissingSymbolIsAnEnvironmentErrorNamingIt) {
  // libc loads but has no ibv_get_device_list.
  const Result<VerbsApi> api = load_verbs_api("libc.so.6");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(api.status().message().rfind("libc.so.6 cannot be loaded: ", 0), 0u) << api.status().message();
  EXPECT_NE(api.status().message().find("ibv_get_device_list"), std::string::npos) << api.status().message();
}

#if defined(EPS_HAVE_EFADV) && EPS_HAVE_EFADV
TEST(EfaApi, LoadsLibefaWithEverySymbol) {
  const Result<const EfaApi*> loaded = efa_api();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_NE((*loaded)->query_device, nullptr);
  EXPECT_NE((*loaded)->create_qp_ex, nullptr);
}

TEST(EfaApi, MissingLibraryIsAnEnvironmentErrorNamingIt) {
  const Result<EfaApi> api = load_efa_api("libeps-no-such-efa.so.1");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(api.status().message().rfind("libeps-no-such-efa.so.1 cannot be loaded: ", 0), 0u)
      << api.status().message();
}
#endif

}  // namespace
}  // namespace eps::fabric::verbs
