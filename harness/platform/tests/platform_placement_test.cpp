// GPUs in `epsuite info` (docs/results.md 9.1 platform: gpus, gpu_devices, gpudirect): the GPU list from
// the device registry, the PCIe/NUMA placement of each GPU next to the NICs in an hwloc topology, and the
// GPUDirect RDMA verdict read from a file-system tree. No GPU or NIC is needed: the topologies are hwloc
// XML documents and the trees temporary directories.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/platform/platform_probe.hpp"
#include "impls/device/cpu/cpu_device.hpp"
#include "impls/device/device_registry.hpp"

namespace eps {
namespace {

// GPUs from the device registry.

device::DeviceBackend unavailable_backend(std::string name, std::string message) {
  device::DeviceBackend b;
  b.name = std::move(name);
  b.count = [message]() -> Result<int> { return Status(StatusCode::kUnavailable, message); };
  return b;
}

// `count` devices named "Fake GPU <ordinal>" described by `properties`, at PCI 0000:<ordinal+3>:00.0.
device::DeviceBackend described_backend(std::string name, int count) {
  device::DeviceBackend b;
  b.name = name;
  b.count = [count] { return Result<int>(count); };
  b.properties = [name](int ordinal) -> Result<device::DeviceProperties> {
    device::DeviceProperties p;
    p.backend = name;
    p.ordinal = ordinal;
    p.name = "Fake GPU " + std::to_string(ordinal);
    p.architecture = "sm_90";
    p.memory_bytes = 80ULL << 30;
    p.pci_bus_id = "0000:0" + std::to_string(ordinal + 3) + ":00.0";
    return p;
  };
  return b;
}

// A host backend (`cpu`, registered as such) that the GPU probe must not count.
device::DeviceBackend cpu_backend_not_to_count() {
  device::DeviceBackend b;
  b.name = "cpu";
  b.host = true;
  b.count = []() -> Result<int> {
    ADD_FAILURE() << "probe_gpus counted the cpu backend";
    return 1;
  };
  return b;
}

TEST(ProbeGpus, WithoutAGpuTheNoteGivesEachBackendsReason) {
  device::DeviceRegistry registry;
  registry.add(cpu_backend_not_to_count());
  registry.add(unavailable_backend(
      "cuda",
      "cuda: libeps_device_cuda.so cannot be loaded: libeps_device_cuda.so: cannot open shared object file"));
  registry.add(unavailable_backend("hip", "runtime missing"));  // not prefixed by its backend: gets it
  NodePlatform node;
  probe_gpus(registry, node);
  EXPECT_TRUE(node.gpus.empty());
  EXPECT_TRUE(node.gpu_devices.empty());
  EXPECT_EQ(node.gpu_note,
            "none: cuda: libeps_device_cuda.so cannot be loaded: libeps_device_cuda.so: cannot open shared "
            "object file; hip: runtime missing");
  EXPECT_EQ(gpu_lines(node), std::vector<std::string>{node.gpu_note});
}

TEST(ProbeGpus, ABackendWithNoDeviceSaysSo) {
  device::DeviceRegistry registry;
  registry.add(described_backend("cuda", 0));
  NodePlatform node;
  probe_gpus(registry, node);
  EXPECT_EQ(node.gpu_note, "none: cuda: no device");
}

TEST(ProbeGpus, ListsEveryDeviceOfEveryGpuBackend) {
  device::DeviceRegistry registry;
  registry.add(cpu_backend_not_to_count());
  registry.add(unavailable_backend("cuda", "cuda: no CUDA device"));
  registry.add(described_backend("hip", 2));
  NodePlatform node;
  probe_gpus(registry, node);
  EXPECT_EQ(node.gpus, (std::vector<std::string>{"hip 0: Fake GPU 0", "hip 1: Fake GPU 1"}));
  EXPECT_EQ(node.gpu_note, "");
  ASSERT_EQ(node.gpu_devices.size(), 2u);
  const GpuDevice& second = node.gpu_devices[1];
  EXPECT_EQ(second.backend, "hip");
  EXPECT_EQ(second.ordinal, 1);
  EXPECT_EQ(second.name, "Fake GPU 1");
  EXPECT_EQ(second.architecture, "sm_90");
  EXPECT_EQ(second.memory_bytes, 80ULL << 30);
  EXPECT_EQ(second.pci_bus_id, "0000:04:00.0");
  EXPECT_TRUE(second.numa_nodes.empty());  // placed later, by the hwloc probe
}

TEST(ProbeGpus, ABackendWithoutPropertiesIsDescribedByOpeningTheDevice) {
  device::DeviceRegistry registry;
  device::DeviceBackend b;
  b.name = "cuda";
  b.count = [] { return Result<int>(1); };
  b.open = [](int) { return device::make_cpu_device(); };  // stands in for a GPU here
  registry.add(std::move(b));
  NodePlatform node;
  probe_gpus(registry, node);
  ASSERT_EQ(node.gpu_devices.size(), 1u);
  const std::string cpu_name = device::make_cpu_device().value()->properties().name;
  EXPECT_EQ(node.gpu_devices[0].name, cpu_name);
  EXPECT_EQ(node.gpus, std::vector<std::string>{"cuda 0: " + cpu_name});
}

TEST(ProbeGpus, ADeviceThatCannotBeDescribedIsListedAsUnknownWithTheError) {
  device::DeviceRegistry registry;
  device::DeviceBackend b = described_backend("cuda", 1);
  b.properties = [](int) -> Result<device::DeviceProperties> {
    return Status(StatusCode::kEnvironment, "cuda:0: properties: driver version is insufficient");
  };
  registry.add(std::move(b));
  NodePlatform node;
  probe_gpus(registry, node);
  EXPECT_EQ(node.gpus, std::vector<std::string>{"cuda 0: unknown"});
  ASSERT_EQ(node.gpu_devices.size(), 1u);
  EXPECT_EQ(node.gpu_devices[0].note, "cuda:0: properties: driver version is insufficient");
}

// This machine through the real registry: GPUs, or the reason of each GPU backend (cuda and hip).
TEST(ProbeGpus, TheNodeProbeListsGpusOrEveryBackendsReason) {
  const NodePlatform node = probe_node();
  EXPECT_EQ(node.gpus.size(), node.gpu_devices.size());
  if (!node.gpus.empty()) GTEST_SKIP() << "this machine has GPUs: " << node.gpus[0];
  EXPECT_EQ(node.gpu_note.rfind("none: cuda: ", 0), 0u) << node.gpu_note;
  EXPECT_NE(node.gpu_note.find("; hip: "), std::string::npos) << node.gpu_note;
  EXPECT_EQ(node.gpudirect, "not possible: no GPU");
}

// Placement.

TEST(PcieRelation, ClassifiesWherePathsMeet) {
  for (bool shared : {true, false}) {
    EXPECT_EQ(classify_pcie_relation(PcieJoin::kPciBridge, shared), PcieRelation::kSamePcieSwitch);
    EXPECT_EQ(classify_pcie_relation(PcieJoin::kHostBridge, shared), PcieRelation::kSameHostBridge);
  }
  EXPECT_EQ(classify_pcie_relation(PcieJoin::kCpuSide, true), PcieRelation::kSameNumaNode);
  EXPECT_EQ(classify_pcie_relation(PcieJoin::kCpuSide, false), PcieRelation::kCrossNuma);
  EXPECT_EQ(pcie_relation_name(PcieRelation::kSamePcieSwitch), "same PCIe switch");
  EXPECT_EQ(pcie_relation_name(PcieRelation::kSameHostBridge), "same host bridge");
  EXPECT_EQ(pcie_relation_name(PcieRelation::kSameNumaNode), "same NUMA node");
  EXPECT_EQ(pcie_relation_name(PcieRelation::kCrossNuma), "cross-NUMA");
  // Nearest first: the order picks the nearest NIC.
  EXPECT_LT(PcieRelation::kSamePcieSwitch, PcieRelation::kSameHostBridge);
  EXPECT_LT(PcieRelation::kSameHostBridge, PcieRelation::kSameNumaNode);
  EXPECT_LT(PcieRelation::kSameNumaNode, PcieRelation::kCrossNuma);
}

// Two packages, one NUMA node each. Package 0: host bridge 0000:[00-0f] with a PCIe switch (behind root
// port 00:01.0) holding GPU 03:00.0 and the NIC 04:00.0 (netdev ib0, and RDMA device mlx5_0 in place of
// @MLX5_0@), and GPU 06:00.0 behind root port 00:02.0; host bridge 0000:[10-1f] with GPU 11:00.0.
// Package 1: host bridge 0000:[80-8f] with GPU 81:00.0, the Ethernet NIC 83:00.0 (eth0) and what replaces
// @SECOND_NIC@. (Markers, not XML comments: hwloc's XML import drops an object's children after a comment.)
constexpr const char* kTwoSocketTemplate = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
 <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
  <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2">
   <object type="NUMANode" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3" local_memory="1073741824"/>
   <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4">
    <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5"/>
   </object>
   <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6">
    <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7"/>
   </object>
   <object type="Bridge" gp_index="20" bridge_type="0-1" depth="0" bridge_pci="0000:[00-0f]">
    <object type="Bridge" gp_index="21" bridge_type="1-1" depth="1" bridge_pci="0000:[01-05]" pci_busid="0000:00:01.0" pci_type="0604 [8086:0001] [0000:0000] 00" pci_link_speed="0.000000">
     <object type="Bridge" gp_index="22" bridge_type="1-1" depth="2" bridge_pci="0000:[02-05]" pci_busid="0000:01:00.0" pci_type="0604 [10b5:8796] [0000:0000] 00" pci_link_speed="0.000000">
      <object type="Bridge" gp_index="23" bridge_type="1-1" depth="3" bridge_pci="0000:[03-03]" pci_busid="0000:02:00.0" pci_type="0604 [10b5:8796] [0000:0000] 00" pci_link_speed="0.000000">
       <object type="PCIDev" gp_index="24" pci_busid="0000:03:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="0.000000"/>
      </object>
      <object type="Bridge" gp_index="25" bridge_type="1-1" depth="3" bridge_pci="0000:[04-04]" pci_busid="0000:02:01.0" pci_type="0604 [10b5:8796] [0000:0000] 00" pci_link_speed="0.000000">
       <object type="PCIDev" gp_index="26" pci_busid="0000:04:00.0" pci_type="0207 [15b3:1021] [15b3:0041] 00" pci_link_speed="0.000000">
        <object type="OSDev" gp_index="27" name="ib0" osdev_type="2"/>
        @MLX5_0@
       </object>
      </object>
     </object>
    </object>
    <object type="Bridge" gp_index="29" bridge_type="1-1" depth="1" bridge_pci="0000:[06-06]" pci_busid="0000:00:02.0" pci_type="0604 [8086:0001] [0000:0000] 00" pci_link_speed="0.000000">
     <object type="PCIDev" gp_index="30" pci_busid="0000:06:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="0.000000"/>
    </object>
   </object>
   <object type="Bridge" gp_index="31" bridge_type="0-1" depth="0" bridge_pci="0000:[10-1f]">
    <object type="Bridge" gp_index="32" bridge_type="1-1" depth="1" bridge_pci="0000:[11-11]" pci_busid="0000:10:01.0" pci_type="0604 [8086:0001] [0000:0000] 00" pci_link_speed="0.000000">
     <object type="PCIDev" gp_index="33" pci_busid="0000:11:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="0.000000"/>
    </object>
   </object>
  </object>
  <object type="Package" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="8">
   <object type="NUMANode" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="9" local_memory="1073741824"/>
   <object type="Core" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="10">
    <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="11"/>
   </object>
   <object type="Core" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="12">
    <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="13"/>
   </object>
   <object type="Bridge" gp_index="40" bridge_type="0-1" depth="0" bridge_pci="0000:[80-8f]">
    <object type="Bridge" gp_index="41" bridge_type="1-1" depth="1" bridge_pci="0000:[81-81]" pci_busid="0000:80:01.0" pci_type="0604 [8086:0001] [0000:0000] 00" pci_link_speed="0.000000">
     <object type="PCIDev" gp_index="42" pci_busid="0000:81:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="0.000000"/>
    </object>
    @SECOND_NIC@
    <object type="Bridge" gp_index="43" bridge_type="1-1" depth="1" bridge_pci="0000:[83-83]" pci_busid="0000:80:03.0" pci_type="0604 [8086:0001] [0000:0000] 00" pci_link_speed="0.000000">
     <object type="PCIDev" gp_index="44" pci_busid="0000:83:00.0" pci_type="0200 [8086:1572] [8086:0001] 01" pci_link_speed="0.000000">
      <object type="OSDev" gp_index="45" name="eth0" osdev_type="2"/>
     </object>
    </object>
   </object>
  </object>
 </object>
</topology>
)";

// The RDMA NIC mlx5_1 (82:00.0) behind root port 80:02.0 of package 1's host bridge.
constexpr const char* kSecondRdmaNic =
    R"(<object type="Bridge" gp_index="46" bridge_type="1-1" depth="1" bridge_pci="0000:[82-82]" pci_busid="0000:80:02.0" pci_type="0604 [8086:0001] [0000:0000] 00" pci_link_speed="0.000000">
     <object type="PCIDev" gp_index="47" pci_busid="0000:82:00.0" pci_type="0207 [15b3:1021] [15b3:0041] 00" pci_link_speed="0.000000">
      <object type="OSDev" gp_index="48" name="mlx5_1" osdev_type="3"/>
     </object>
    </object>)";

constexpr const char* kMlx5_0 = R"(<object type="OSDev" gp_index="28" name="mlx5_0" osdev_type="3"/>)";

std::string replaced(std::string text, const std::string& marker, const std::string& with) {
  const std::size_t at = text.find(marker);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << marker << " in the topology";
  } else {
    text.replace(at, marker.size(), with);
  }
  return text;
}

std::string two_socket_topology(bool with_mlx5_0, const std::string& second_nic = "") {
  return replaced(replaced(kTwoSocketTemplate, "@MLX5_0@", with_mlx5_0 ? kMlx5_0 : ""), "@SECOND_NIC@",
                  second_nic);
}

std::vector<GpuDevice> gpus_at(const std::vector<std::string>& pci_bus_ids) {
  std::vector<GpuDevice> gpus;
  for (const std::string& id : pci_bus_ids) {
    GpuDevice gpu;
    gpu.backend = "cuda";
    gpu.ordinal = static_cast<int>(gpus.size());
    gpu.name = "H100";
    gpu.pci_bus_id = id;
    gpus.push_back(gpu);
  }
  return gpus;
}

#if defined(EPS_HAVE_HWLOC)

void expect_placed(const GpuDevice& gpu, std::vector<int> numa_nodes, const std::string& nic,
                   const std::string& relation) {
  SCOPED_TRACE(gpu.pci_bus_id);
  EXPECT_EQ(gpu.numa_nodes, numa_nodes);
  EXPECT_EQ(gpu.nearest_nic, nic);
  EXPECT_EQ(gpu.nic_relation, relation);
  EXPECT_EQ(gpu.note, "");
}

TEST(GpuPlacement, EachRelationToTheOneRdmaNic) {
  std::vector<GpuDevice> gpus = gpus_at({"0000:03:00.0", "0000:06:00.0", "0000:11:00.0", "0000:81:00.0"});
  ASSERT_TRUE(place_gpus_in_xml_topology(two_socket_topology(true), gpus).ok());
  expect_placed(gpus[0], {0}, "mlx5_0", "same PCIe switch");
  expect_placed(gpus[1], {0}, "mlx5_0", "same host bridge");
  expect_placed(gpus[2], {0}, "mlx5_0", "same NUMA node");
  // eth0 sits under GPU 81's own host bridge, but GPUDirect needs an RDMA NIC: mlx5_0 across the sockets.
  expect_placed(gpus[3], {1}, "mlx5_0", "cross-NUMA");
  EXPECT_EQ(describe_gpu(gpus[3]), "cuda 3: H100 (PCI 0000:81:00.0, NUMA 1, nearest NIC mlx5_0: cross-NUMA)");
}

TEST(GpuPlacement, TheNearestOfTwoRdmaNics) {
  const std::string xml = two_socket_topology(true, kSecondRdmaNic);
  std::vector<GpuDevice> gpus = gpus_at({"0000:03:00.0", "0000:11:00.0", "0000:81:00.0"});
  ASSERT_TRUE(place_gpus_in_xml_topology(xml, gpus).ok());
  expect_placed(gpus[0], {0}, "mlx5_0", "same PCIe switch");
  expect_placed(gpus[1], {0}, "mlx5_0", "same NUMA node");
  expect_placed(gpus[2], {1}, "mlx5_1", "same host bridge");
}

TEST(GpuPlacement, WithoutAnRdmaNicTheNearestNetworkDevice) {
  const std::string xml = two_socket_topology(false);
  std::vector<GpuDevice> gpus = gpus_at({"0000:03:00.0", "0000:81:00.0"});
  ASSERT_TRUE(place_gpus_in_xml_topology(xml, gpus).ok());
  expect_placed(gpus[0], {0}, "ib0", "same PCIe switch");
  expect_placed(gpus[1], {1}, "eth0", "same host bridge");
}

TEST(GpuPlacement, AGpuOutsideTheTopologyIsNotPlacedAndSaysWhy) {
  std::vector<GpuDevice> gpus = gpus_at({"0000:99:00.0", ""});
  ASSERT_TRUE(place_gpus_in_xml_topology(two_socket_topology(true), gpus).ok());
  EXPECT_TRUE(gpus[0].numa_nodes.empty());
  EXPECT_EQ(gpus[0].nearest_nic, "");
  EXPECT_EQ(gpus[0].note, "not placed: PCI 0000:99:00.0 is not in the hwloc topology");
  EXPECT_EQ(gpus[1].note, "not placed: the backend reports no PCI bus id");
}

TEST(GpuPlacement, ATopologyWithoutNicsPlacesWithNoNic) {
  std::string xml = replaced(two_socket_topology(false), R"(name="ib0" osdev_type="2")",
                             R"(name="nvme0n1" osdev_type="0")");
  xml = replaced(xml, R"(name="eth0" osdev_type="2")", R"(name="nvme2n1" osdev_type="0")");
  std::vector<GpuDevice> gpus = gpus_at({"0000:03:00.0"});
  ASSERT_TRUE(place_gpus_in_xml_topology(xml, gpus).ok());
  expect_placed(gpus[0], {0}, "", "");
  EXPECT_EQ(describe_gpu(gpus[0]), "cuda 0: H100 (PCI 0000:03:00.0, NUMA 0, no NIC)");
}

TEST(GpuPlacement, UnreadableXmlIsAnInvalidArgument) {
  std::vector<GpuDevice> gpus = gpus_at({"0000:03:00.0"});
  const Status status = place_gpus_in_xml_topology("<topology version=\"2.0\"><object", gpus);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
}

#else

TEST(GpuPlacement, UnavailableWithoutHwloc) {
  std::vector<GpuDevice> gpus = gpus_at({"0000:03:00.0"});
  EXPECT_EQ(place_gpus_in_xml_topology(two_socket_topology(true), gpus).code(), StatusCode::kUnavailable);
}

#endif

// GPUDirect RDMA.

// A file-system tree under a fresh temporary directory, removed with the object.
class FakeRoot {
 public:
  FakeRoot() {
    std::string pattern = (std::filesystem::temp_directory_path() / "eps_gpudirect_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    root_ = pattern;
  }
  ~FakeRoot() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  FakeRoot& module(const std::string& name) {
    std::filesystem::create_directories(root_ / "sys/module" / name);
    return *this;
  }
  FakeRoot& file(const std::string& path, const std::string& text) {
    std::filesystem::create_directories((root_ / path).parent_path());
    std::ofstream(root_ / path) << text;
    return *this;
  }
  FakeRoot& kernel(const std::string& release) { return file("proc/sys/kernel/osrelease", release + "\n"); }
  FakeRoot& nvidia_driver(bool open_module) {
    return file(
        "proc/driver/nvidia/version",
        open_module
            ? "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n"
            : "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n");
  }
  const std::filesystem::path& path() const { return root_; }

 private:
  std::filesystem::path root_;
};

void expect_gpudirect(const GpuDirect& got, bool possible, const std::string& detail) {
  EXPECT_EQ(got.possible, possible) << got.detail;
  EXPECT_EQ(got.detail, detail);
}

TEST(GpuDirectProbe, NvidiaNeedsItsModule) {
  FakeRoot root;
  root.kernel("6.1.0-18-amd64");
  expect_gpudirect(probe_gpudirect("cuda", root.path()), false, "the nvidia kernel module is not loaded");
}

TEST(GpuDirectProbe, NvidiaPeermemOrTheLegacyModule) {
  FakeRoot peermem;
  peermem.module("nvidia").module("nvidia_peermem").kernel("5.4.0");
  expect_gpudirect(probe_gpudirect("cuda", peermem.path()), true, "nvidia_peermem loaded");
  FakeRoot legacy;
  legacy.module("nvidia").module("nv_peer_mem");
  expect_gpudirect(probe_gpudirect("cuda", legacy.path()), true, "nv_peer_mem loaded");
}

TEST(GpuDirectProbe, NvidiaDmaBufNeedsTheOpenModuleAndKernel512) {
  FakeRoot open_module;
  open_module.module("nvidia").kernel("6.1.0-18-amd64").nvidia_driver(true);
  expect_gpudirect(probe_gpudirect("cuda", open_module.path()), true,
                   "dma-buf (NVIDIA open kernel module, kernel 6.1.0-18-amd64)");
  FakeRoot proprietary;
  proprietary.module("nvidia").kernel("6.1.0-18-amd64").nvidia_driver(false);
  expect_gpudirect(
      probe_gpudirect("cuda", proprietary.path()), false,
      "nvidia_peermem is not loaded; dma-buf: the nvidia kernel module is not NVIDIA's open one");
  FakeRoot old_kernel;
  old_kernel.module("nvidia").kernel("5.10.0-28-amd64").nvidia_driver(true);
  expect_gpudirect(probe_gpudirect("cuda", old_kernel.path()), false,
                   "nvidia_peermem is not loaded; dma-buf: kernel 5.10.0-28-amd64 is older than 5.12");
  FakeRoot no_release;
  no_release.module("nvidia").nvidia_driver(true);
  expect_gpudirect(
      probe_gpudirect("cuda", no_release.path()), false,
      "nvidia_peermem is not loaded; dma-buf: the kernel release is unknown (proc/sys/kernel/osrelease)");
}

TEST(GpuDirectProbe, AmdgpuThroughDmaBuf) {
  FakeRoot none;
  none.kernel("6.8.0");
  expect_gpudirect(probe_gpudirect("hip", none.path()), false, "the amdgpu kernel module is not loaded");
  FakeRoot loaded;
  loaded.module("amdgpu").kernel("6.8.0");
  expect_gpudirect(probe_gpudirect("hip", loaded.path()), true, "dma-buf (amdgpu, kernel 6.8.0)");
  FakeRoot old_kernel;
  old_kernel.module("amdgpu").kernel("5.4.0-150-generic");
  expect_gpudirect(probe_gpudirect("hip", old_kernel.path()), false,
                   "dma-buf: kernel 5.4.0-150-generic is older than 5.12");
}

TEST(GpuDirectProbe, OtherBackendsHaveNoCheck) {
  FakeRoot root;
  expect_gpudirect(probe_gpudirect("cpu", root.path()), false, "no GPUDirect RDMA check for backend 'cpu'");
}

TEST(GpuDirectProbe, KernelReleasesFrom512RegisterDmaBuf) {
  EXPECT_TRUE(kernel_registers_dma_buf("5.12.0"));
  EXPECT_TRUE(kernel_registers_dma_buf("6.1.0-18-amd64"));
  EXPECT_TRUE(kernel_registers_dma_buf("10.0"));
  EXPECT_FALSE(kernel_registers_dma_buf("5.11.22"));
  EXPECT_FALSE(kernel_registers_dma_buf("4.19.0"));
  EXPECT_FALSE(kernel_registers_dma_buf("6"));
  EXPECT_FALSE(kernel_registers_dma_buf("6."));
  EXPECT_FALSE(kernel_registers_dma_buf("linux"));
  EXPECT_FALSE(kernel_registers_dma_buf(""));
}

TEST(GpuDirectProbe, NoRdmaDeviceMakesItImpossible) {
  expect_gpudirect(with_rdma_device({true, "nvidia_peermem loaded"}, true), true, "nvidia_peermem loaded");
  expect_gpudirect(with_rdma_device({true, "nvidia_peermem loaded"}, false), false,
                   "no RDMA device; nvidia_peermem loaded");
  expect_gpudirect(with_rdma_device({false, "the amdgpu kernel module is not loaded"}, false), false,
                   "no RDMA device; not possible: the amdgpu kernel module is not loaded");
}

TEST(GpuDirectProbe, TheNodeLineNamesBackendsOnlyWhenSeveralHaveGpus) {
  EXPECT_EQ(gpudirect_summary({}), "not possible: no GPU");
  std::vector<GpuDevice> gpus = gpus_at({"0000:03:00.0", "0000:04:00.0"});
  for (GpuDevice& gpu : gpus) gpu.gpudirect = {true, "nvidia_peermem loaded"};
  EXPECT_EQ(gpudirect_summary(gpus), "nvidia_peermem loaded");
  gpus[1].backend = "hip";
  gpus[1].gpudirect = {false, "the amdgpu kernel module is not loaded"};
  EXPECT_EQ(gpudirect_summary(gpus),
            "cuda: nvidia_peermem loaded; hip: not possible: the amdgpu kernel module is not loaded");
}

}  // namespace
}  // namespace eps
