// The run-time libfabric loader (fi_api.hpp): the real library here, and the errors of a missing library
// or symbol.
#include "impls/fabric/libfabric/fi_api.hpp"

#include <gtest/gtest.h>

#include <string>

namespace eps::fabric::ofi {
namespace {

TEST(FiApi, LoadsLibfabricWithEverySymbol) {
  const Result<const FiApi*> loaded = fi_api();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const FiApi& fi = **loaded;
  EXPECT_NE(fi.getinfo, nullptr);
  EXPECT_NE(fi.freeinfo, nullptr);
  EXPECT_NE(fi.dupinfo, nullptr);
  EXPECT_NE(fi.fabric, nullptr);
  EXPECT_NE(fi.strerror, nullptr);
  EXPECT_NE(fi.version, nullptr);
  // The library is at least as new as the headers epsuite was built with (the same major version).
  EXPECT_EQ(FI_MAJOR(fi.version()), FI_MAJOR_VERSION);
  EXPECT_GE(FI_MINOR(fi.version()), FI_MINOR_VERSION);
  fi_info* info = fi.allocinfo();
  ASSERT_NE(info, nullptr);
  EXPECT_NE(info->domain_attr, nullptr);
  fi.freeinfo(info);
}

TEST(FiApi, LoadsOnce) {
  const Result<const FiApi*> first = fi_api();
  const Result<const FiApi*> second = fi_api();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

TEST(FiApi, MissingLibraryIsAnEnvironmentErrorNamingIt) {
  const Result<FiApi> api = load_fi_api("libeps-no-such-fabric.so.1");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(api.status().message().rfind("libeps-no-such-fabric.so.1 cannot be loaded: ", 0), 0u)
      << api.status().message();
}

TEST(FiApi, MissingSymbolIsAnEnvironmentErrorNamingIt) {
  // libc loads but has no fi_getinfo.
  const Result<FiApi> api = load_fi_api("libc.so.6");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(api.status().message().rfind("libc.so.6 cannot be loaded: ", 0), 0u) << api.status().message();
  EXPECT_NE(api.status().message().find("fi_getinfo"), std::string::npos) << api.status().message();
}

}  // namespace
}  // namespace eps::fabric::ofi
