// The node probe behind `epsuite info` and every results file's platform (docs/results.md 9.1) on the machine
// that runs the test: it must find a CPU model and memory, and for each list either entries or a reason.
#include "harness/platform/platform_probe.hpp"

#include <gtest/gtest.h>

namespace eps {
namespace {

TEST(PlatformProbe, FindsCpuAndMemory) {
  const NodePlatform node = probe_node();
  EXPECT_FALSE(node.cpu_model.empty());
  EXPECT_NE(node.cpu_model, "unknown");
  EXPECT_GT(node.memory_bytes, 0u);
  EXPECT_TRUE(node.libraries.contains("fmt"));
  EXPECT_TRUE(node.libraries.contains("nlohmann_json"));
}

TEST(PlatformProbe, EveryListHasEntriesOrAReason) {
  const NodePlatform node = probe_node();
  EXPECT_NE(node.fabric_providers.empty(), node.fabric_note.empty()) << node.fabric_note;
  EXPECT_NE(node.verbs_devices.empty(), node.verbs_note.empty()) << node.verbs_note;
  EXPECT_NE(node.gpus.empty(), node.gpu_note.empty()) << node.gpu_note;
  if (node.topology_note.empty()) {
    EXPECT_GT(node.topology.pus, 0);
    EXPECT_GE(node.topology.cores, 1);
    EXPECT_GE(node.topology.packages, 1);
  }
  for (const FabricProvider& p : node.fabric_providers) {
    EXPECT_FALSE(p.name.empty());
    EXPECT_EQ(p.endpoint.rfind("FI_EP_", 0), 0u) << p.endpoint;
  }
}

#if defined(EPS_HAVE_LIBFABRIC)
// docs/architecture.md "Platform facts": the CI machine's libfabric lists the tcp provider and shm.
TEST(PlatformProbe, LibfabricListsTcpAndShm) {
  const NodePlatform node = probe_node();
  ASSERT_TRUE(node.libraries.contains("libfabric"));
  bool tcp = false, shm = false;
  for (const FabricProvider& p : node.fabric_providers) {
    tcp = tcp || p.name.find("tcp") != std::string::npos;
    shm = shm || p.name == "shm";
  }
  EXPECT_TRUE(tcp && shm) << node.fabric_note;
}
#endif

#if defined(EPS_HAVE_HWLOC)
TEST(PlatformProbe, HwlocTopologyLoads) {
  const NodePlatform node = probe_node();
  EXPECT_TRUE(node.topology_note.empty()) << node.topology_note;
  EXPECT_TRUE(node.libraries.contains("hwloc_api"));
  EXPECT_GE(node.topology.numa_nodes, 1);
}
#endif

}  // namespace
}  // namespace eps
