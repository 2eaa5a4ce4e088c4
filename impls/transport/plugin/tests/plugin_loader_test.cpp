// The EP plugin loader (plugin_library.hpp) and `--transport plugin:NAME|PATH` in the registry
// (registry.hpp): each malformed library is refused with kInvalidArgument (exit 2) naming what is wrong; a
// good one is found by path and by name through EPSUITE_PLUGIN_PATH and registered as "plugin:<its name>"
// with its declarations.
#include <algorithm>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "impls/transport/plugin/plugin_library.hpp"
#include "impls/transport/registry.hpp"

namespace eps::transport {
namespace {

std::string plugin_path(const std::string& name) {
  return std::string(EPS_TEST_PLUGIN_DIR) + "/" + plugin_file_name(name);
}

void expect_refused(std::string_view spec, std::string_view wanted) {
  Result<std::shared_ptr<const PluginLibrary>> loaded = load_plugin(spec);
  ASSERT_FALSE(loaded.ok()) << spec << " was not refused";
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded.status().exit_code(), 2);
  EXPECT_NE(loaded.status().message().find(wanted), std::string::npos) << loaded.status().message();
}

TEST(PluginLoader, RefusesAnotherAbiVersion) {
  expect_refused(plugin_path("bad-version"),
                 "its eps_ep_plugin_v1 table has abi_version 2, this epsuite speaks version 1");
}

TEST(PluginLoader, RefusesALibraryWithoutTheV1Symbol) {
  expect_refused(
      plugin_path("other-version"),
      "it has no symbol eps_ep_plugin_v1, only eps_ep_plugin_v2: it was built for another ABI version");
}

TEST(PluginLoader, RefusesANullEntry) {
  expect_refused(plugin_path("null-entry"), "entry 'combine' of its eps_ep_plugin_v1 table is NULL");
}

TEST(PluginLoader, RefusesDeclarationsOutsideTheAbi) {
  expect_refused(
      plugin_path("bad-trees"),
      "properties.trees: ht-rank and ht-two-level follow ht-rank-major, which it does not declare");
}

TEST(PluginLoader, RefusesAMissingFileAndNamesThePlacesLookedIn) {
  expect_refused(std::string(EPS_TEST_PLUGIN_DIR) + "/libnothing.so", "cannot be loaded: ");
  ::setenv("EPSUITE_PLUGIN_PATH", "/nonexistent-a:/nonexistent-b", 1);
  expect_refused(
      "nothing-here",
      "libepsuite-plugin-nothing-here.so is neither in EPSUITE_PLUGIN_PATH nor on the library path: "
      "/nonexistent-a/libepsuite-plugin-nothing-here.so: cannot open shared object file");
  expect_refused("bad/../name", "cannot be loaded");
  expect_refused("bad name", "a plugin is named by 1-64 characters of [A-Za-z0-9._-]");
  ::unsetenv("EPSUITE_PLUGIN_PATH");
}

TEST(PluginLoader, FindsAPluginByNameThroughEpsuitePluginPath) {
  ::setenv("EPSUITE_PLUGIN_PATH", "/nonexistent:" EPS_TEST_PLUGIN_DIR, 1);
  Result<std::shared_ptr<const PluginLibrary>> loaded = load_plugin("test-mpi");
  ::unsetenv("EPSUITE_PLUGIN_PATH");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ((*loaded)->name, "test-mpi");
  EXPECT_EQ((*loaded)->path, plugin_path("test-mpi"));
  const Capabilities& caps = (*loaded)->capabilities;
  EXPECT_EQ(caps.layouts.size(), 3u);
  EXPECT_TRUE(caps.cached_dispatch);
  EXPECT_TRUE(caps.fixed_order(Layout::kHtRankMajor));
  EXPECT_TRUE(caps.fixed_order(Layout::kLl));
  // The same library by path is the same plugin.
  Result<std::shared_ptr<const PluginLibrary>> again = load_plugin(plugin_path("test-mpi"));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->get(), loaded->get());
}

TEST(PluginCapabilities, MapsTheDeclarations) {
  eps_plugin_properties_v1 d{};
  d.layouts = EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_HT_EXPERT_MAJOR) | EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_LL);
  d.trees = EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_LL_WEIGHTED);
  d.dtypes = EPS_PLUGIN_BIT(EPS_PLUGIN_DTYPE_FP8);
  d.memory = EPS_PLUGIN_BIT(EPS_PLUGIN_MEMORY_DEVICE);
  d.open_order = d.layouts;
  d.max_ranks = d.max_experts = d.max_top_k = d.max_hidden = d.max_tokens_per_rank = 8;
  Result<Capabilities> caps = plugin_capabilities(d);
  ASSERT_TRUE(caps.ok()) << caps.status().message();
  EXPECT_FALSE(caps->supports(Layout::kHtRankMajor));
  EXPECT_FALSE(caps->fixed_order(Layout::kHtExpertMajor));
  EXPECT_FALSE(caps->fixed_order(Layout::kLl));
  EXPECT_FALSE(caps->ll_ordered);
  EXPECT_FALSE(caps->supports(PayloadType::kBf16));
  EXPECT_EQ(caps->memory, std::vector<MemoryKind>{MemoryKind::kDevice});
  EXPECT_EQ(caps->max_tokens_per_rank, 8);

  eps_plugin_properties_v1 bad = d;
  bad.open_order = EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR);
  EXPECT_NE(plugin_capabilities(bad).status().message().find("properties.open_order"), std::string::npos);
  bad = d;
  bad.dtypes = 0x4;
  EXPECT_NE(plugin_capabilities(bad).status().message().find("properties.dtypes: bits 0x4 are not in ABI v1"),
            std::string::npos);
  bad = d;
  bad.max_hidden = 0;
  EXPECT_NE(plugin_capabilities(bad).status().message().find("properties.max_hidden: must be >= 1, got 0"),
            std::string::npos);
}

TEST(PluginTransports, ResolveAsPluginNameAndSelectBesideBuiltins) {
  const std::string path = plugin_path("test-mpi");
  Result<std::string> name = resolve_transport("plugin:" + path);
  ASSERT_TRUE(name.ok()) << name.status().message();
  EXPECT_EQ(*name, "plugin:test-mpi");
  ASSERT_NE(transport_registry().find("plugin:test-mpi"), nullptr);
  EXPECT_EQ(transport_registry().find("plugin:test-mpi")->capabilities().layouts.size(), 3u);

  Result<std::vector<std::string>> some = select_transports("mpi,plugin:" + path);
  ASSERT_TRUE(some.ok()) << some.status().message();
  EXPECT_EQ(*some, (std::vector<std::string>{"mpi", "plugin:test-mpi"}));
  // "all" is the built-in backends; a plugin is added by naming it.
  Result<std::vector<std::string>> all = select_transports("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(std::count(all->begin(), all->end(), "plugin:test-mpi"), 0);
  Result<std::vector<std::string>> with = select_transports("all,plugin:test-mpi");
  ASSERT_TRUE(with.ok()) << with.status().message();
  EXPECT_EQ(with->back(), "plugin:test-mpi");
  EXPECT_EQ(with->size(), all->size() + 1);
  EXPECT_FALSE(select_transports("plugin:test-mpi,plugin:" + path).ok());  // the same plugin twice

  Result<std::vector<std::string>> refused = select_transports("mpi,plugin:" + plugin_path("bad-version"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().exit_code(), 2);
}

}  // namespace
}  // namespace eps::transport
