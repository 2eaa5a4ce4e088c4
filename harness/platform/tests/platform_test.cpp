// Platform identity (docs/results.md 9.1 platform, docs/results.md 9.2 fingerprints) and user tags.
#include "harness/platform/platform.hpp"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace eps {
namespace {

TEST(Fnv1a64, PublishedTestVectors) {
  // From the FNV reference test suite (Fowler/Noll/Vo).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

Platform two_ranks(std::string host0, std::string host1) {
  Platform p;
  p.ranks = {{std::move(host0), "cpu: X", "mlx5_0"}, {std::move(host1), "cpu: X", "mlx5_0"}};
  p.provider = "mpi (btl self,vader)";
  p.libraries = {{"mpi", "Open MPI v4.1.4"}};
  return p;
}

TEST(Platform, FingerprintIgnoresHostNamesOnly) {
  const std::string base = platform_fingerprint(two_ranks("node-a", "node-b"));
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(platform_fingerprint(two_ranks("node-c", "node-d")), base);
  Platform device = two_ranks("node-a", "node-b");
  device.ranks[1].device = "cpu: Y";
  EXPECT_NE(platform_fingerprint(device), base);
  Platform nic = two_ranks("node-a", "node-b");
  nic.ranks[0].nic = "none";
  EXPECT_NE(platform_fingerprint(nic), base);
  Platform library = two_ranks("node-a", "node-b");
  library.libraries["mpi"] = "Open MPI v5.0.0";
  EXPECT_NE(platform_fingerprint(library), base);
  Platform fewer = two_ranks("node-a", "node-b");
  fewer.ranks.pop_back();
  EXPECT_NE(platform_fingerprint(fewer), base);
}

TEST(Platform, FingerprintCoversTheNodeButNotTagsOrDomains) {
  Platform base = two_ranks("node-a", "node-b");
  base.node.cpu_model = "X";
  base.node.memory_bytes = 64ULL << 30;
  base.node.fabric_providers = {{"tcp;ofi_rxm", "FI_EP_RDM", 4, {"FI_ORDER_WAW"}, {"eth0"}}};
  const std::string fingerprint = platform_fingerprint(base);

  Platform tagged = base;
  tagged.tags = {{"gpu", "H100"}, {"nic", "efa"}};
  EXPECT_EQ(platform_fingerprint(tagged), fingerprint);
  Platform other_interface = base;
  other_interface.node.fabric_providers[0].domains = {"ens5"};
  EXPECT_EQ(platform_fingerprint(other_interface), fingerprint);
  Platform noted = base;
  noted.node.gpu_note = "none: cuda: no device";
  EXPECT_EQ(platform_fingerprint(noted), fingerprint);
  Platform wobble = base;  // 64 GiB - 100 MiB still rounds to 64 GiB
  wobble.node.memory_bytes -= 100ULL << 20;
  EXPECT_EQ(platform_fingerprint(wobble), fingerprint);

  Platform memory = base;
  memory.node.memory_bytes = 128ULL << 30;
  EXPECT_NE(platform_fingerprint(memory), fingerprint);
  Platform gpu = base;
  gpu.node.gpus = {"cuda 0: NVIDIA H100"};
  EXPECT_NE(platform_fingerprint(gpu), fingerprint);
  Platform order = base;
  order.node.fabric_providers[0].msg_order.clear();
  EXPECT_NE(platform_fingerprint(order), fingerprint);
  Platform cq = base;
  cq.node.fabric_providers[0].cq_data_size = 8;
  EXPECT_NE(platform_fingerprint(cq), fingerprint);
  Platform topology = base;
  topology.node.topology.numa_nodes = 2;
  EXPECT_NE(platform_fingerprint(topology), fingerprint);
  Platform library = base;
  library.node.libraries["libfabric"] = "1.18";
  EXPECT_NE(platform_fingerprint(library), fingerprint);
  Platform cpu = base;
  cpu.node.cpu_model = "Y";
  EXPECT_NE(platform_fingerprint(cpu), fingerprint);
}

TEST(ParseTags, KeyValuePairs) {
  Result<std::map<std::string, std::string>> tags = parse_tags({"gpu=H100", "nic=efa", "note=a=b c"});
  ASSERT_TRUE(tags.ok()) << tags.status().message();
  EXPECT_EQ(*tags, (std::map<std::string, std::string>{{"gpu", "H100"}, {"nic", "efa"}, {"note", "a=b c"}}));
  EXPECT_TRUE(parse_tags({})->empty());
}

TEST(ParseTags, RejectsMalformedTags) {
  EXPECT_EQ(parse_tags({"gpu"}).status().message(), "--tag: expected key=value, got 'gpu'");
  EXPECT_EQ(parse_tags({"=H100"}).status().message(),
            "--tag: key must be 1-64 characters of [A-Za-z0-9_.-], got ''");
  EXPECT_EQ(parse_tags({"g pu=H100"}).status().message(),
            "--tag: key must be 1-64 characters of [A-Za-z0-9_.-], got 'g pu'");
  EXPECT_EQ(parse_tags({"gpu="}).status().message(),
            "--tag gpu: value must be 1-256 printable characters, got ''");
  EXPECT_EQ(parse_tags({"gpu=H100", "gpu=A100"}).status().message(), "--tag: key 'gpu' given twice");
  EXPECT_EQ(parse_tags({std::string(65, 'k') + "=v"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_tags({"gpu=" + std::string(257, 'v')}).status().code(), StatusCode::kInvalidArgument);
}

TEST(Platform, JsonCarriesHostsRanksAndFingerprint) {
  const Platform p = two_ranks("node-a", "node-b");
  const Json j = platform_to_json(p);
  EXPECT_EQ(j.at("hostnames"), Json::parse(R"(["node-a","node-b"])"));
  EXPECT_EQ(j.at("ranks")[1], Json::parse(R"({"rank":1,"host":"node-b","device":"cpu: X","nic":"mlx5_0"})"));
  EXPECT_EQ(j.at("provider"), "mpi (btl self,vader)");
  EXPECT_EQ(j.at("fingerprint"), platform_fingerprint(p));
  EXPECT_EQ(j.at("tags"), Json::object());
  Platform tagged = p;
  tagged.tags = {{"gpu", "H100"}};
  tagged.node.libraries["hwloc_api"] = "2.8.0";
  const Json t = platform_to_json(tagged);
  EXPECT_EQ(t.at("tags"), Json::parse(R"({"gpu":"H100"})"));
  EXPECT_EQ(t.at("libraries"), Json::parse(R"({"hwloc_api":"2.8.0","mpi":"Open MPI v4.1.4"})"));
}

GpuDevice placed_h100() {
  GpuDevice g;
  g.backend = "cuda";
  g.ordinal = 0;
  g.name = "NVIDIA H100 80GB HBM3";
  g.architecture = "sm_90";
  g.memory_bytes = 85'520'809'984ULL;  // what an "80GB" H100 reports: 79.6 GiB
  g.pci_bus_id = "0000:1b:00.0";
  g.numa_nodes = {0};
  g.nearest_nic = "mlx5_0";
  g.nic_relation = "same PCIe switch";
  g.gpudirect = {true, "nvidia_peermem loaded"};
  return g;
}

TEST(Platform, DescribesAGpuWithWhatIsKnown) {
  GpuDevice g = placed_h100();
  EXPECT_EQ(
      describe_gpu(g),
      "cuda 0: NVIDIA H100 80GB HBM3 (sm_90, 80 GiB, PCI 0000:1b:00.0, NUMA 0, nearest NIC mlx5_0: same "
      "PCIe switch)");
  g.nearest_nic.clear();
  g.nic_relation.clear();
  g.numa_nodes = {0, 1};
  EXPECT_EQ(describe_gpu(g),
            "cuda 0: NVIDIA H100 80GB HBM3 (sm_90, 80 GiB, PCI 0000:1b:00.0, NUMA 0,1, no NIC)");
  GpuDevice unplaced;
  unplaced.backend = "hip";
  unplaced.ordinal = 1;
  unplaced.name = "unknown";
  unplaced.note = "hip:1: properties: no device";
  EXPECT_EQ(describe_gpu(unplaced), "hip 1: unknown (hip:1: properties: no device)");
  unplaced.note.clear();
  EXPECT_EQ(describe_gpu(unplaced), "hip 1: unknown");
}

TEST(Platform, GpuLinesAreOnePerGpuOrTheNote) {
  NodePlatform none;
  none.gpu_note =
      "none: cuda: libeps_device_cuda.so cannot be loaded: x; hip: libeps_device_hip.so cannot be loaded: y";
  EXPECT_EQ(gpu_lines(none), std::vector<std::string>{none.gpu_note});
  NodePlatform two;
  two.gpu_devices = {placed_h100(), placed_h100()};
  two.gpu_devices[1].ordinal = 1;
  two.gpus = {"cuda 0: NVIDIA H100 80GB HBM3", "cuda 1: NVIDIA H100 80GB HBM3"};
  const std::vector<std::string> lines = gpu_lines(two);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], describe_gpu(two.gpu_devices[1]));
}

// The GPU records and the GPUDirect line are reported, never fingerprinted: only `gpus` identifies the GPUs.
TEST(Platform, GpuRecordsAreInTheJsonButNotInTheFingerprint) {
  Platform base = two_ranks("node-a", "node-b");
  base.node.gpus = {"cuda 0: NVIDIA H100 80GB HBM3"};
  const std::string fingerprint = platform_fingerprint(base);
  Platform detailed = base;
  detailed.node.gpu_devices = {placed_h100()};
  detailed.node.gpudirect = "nvidia_peermem loaded";
  EXPECT_EQ(platform_fingerprint(detailed), fingerprint);

  const Json j = platform_to_json(detailed);
  EXPECT_EQ(j.at("gpus"), Json::parse(R"(["cuda 0: NVIDIA H100 80GB HBM3"])"));
  EXPECT_EQ(j.at("gpudirect"), "nvidia_peermem loaded");
  EXPECT_EQ(j.at("gpu_devices"), Json::parse(R"([{"backend":"cuda","ordinal":0,"name":"NVIDIA H100 80GB HBM3",
      "architecture":"sm_90","memory_bytes":85520809984,"pci_bus_id":"0000:1b:00.0","numa_nodes":[0],
      "nearest_nic":"mlx5_0","nic_relation":"same PCIe switch",
      "gpudirect":{"possible":true,"detail":"nvidia_peermem loaded"},"note":""}])"));
  const Json none = platform_to_json(two_ranks("node-a", "node-b"));
  EXPECT_EQ(none.at("gpu_devices"), Json::array());
}

}  // namespace
}  // namespace eps
