// The platform a run happened on (docs/results.md 9.1 `platform`): host names, per-rank device and NIC, the
// communication provider, library versions, the node's hardware (CPU model, memory, hwloc topology, GPUs,
// verbs devices, libfabric providers), user tags, and a fingerprint of the hardware/software identity.
//
// The fingerprint is FNV-1a 64 (hex, 16 digits) over the canonical JSON of the identity: per-rank device
// and NIC, provider, libraries, and the node's CPU model, memory in whole GiB, topology counts and I/O
// devices, GPUs, verbs devices and libfabric providers (name, endpoint type, CQ data size, message
// ordering). Excluded: host names, libfabric domain names (interfaces), the notes that explain an empty
// list, user tags and the fingerprint itself. So two runs on different but identical nodes share a
// fingerprint, whatever they were tagged; a different device, NIC, provider, library version or rank
// count changes it (docs/results.md 9.2 compares only equal fingerprints). The GPU records (`gpu_devices`:
// placement, nearest NIC, GPUDirect) and the node's `gpudirect` line are not in the fingerprint either: the
// GPUs enter it through `gpus` ("cuda 0: NAME") alone, so a loaded kernel module or a re-cabled NIC does
// not make results incomparable.
//
// Tags (`--tag key=value`, repeatable): key is 1-64 characters of [A-Za-z0-9_.-], value 1-256 printable
// characters; a repeated key is an error. Stored under platform.tags for plots and reports.
//
// `discover_platform` is collective over MPI_COMM_WORLD and lives in the eps_mpi library; the node probe
// is harness/platform_probe.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "impls/fabric/fabric.hpp"
#include "impls/runtime/deadline.hpp"
#include "impls/runtime/json_io.hpp"
#include "reference/common/status.hpp"

namespace eps {

struct RankPlatform {
  std::string host;
  std::string device;  // e.g. "cpu: <model name>"
  std::string nic;     // RDMA devices, or "none"
};

// Object counts of the hwloc topology of one node.
struct NodeTopology {
  int packages = 0;
  int numa_nodes = 0;
  int cores = 0;
  int pus = 0;
  int pci_devices = 0;
  std::vector<std::string> io_devices;  // hwloc OS devices of type network, openfabrics, GPU, coprocessor
};

// One libfabric provider/endpoint type as fi_getinfo reports it.
struct FabricProvider {
  std::string name;                    // prov_name, e.g. "tcp;ofi_rxm"
  std::string endpoint;                // "FI_EP_RDM", "FI_EP_MSG", "FI_EP_DGRAM"
  std::uint64_t cq_data_size = 0;      // bytes of remote CQ data
  std::vector<std::string> msg_order;  // e.g. "FI_ORDER_WAW"
  std::vector<std::string> domains;    // e.g. "eth0", "lo" (not in the fingerprint)
};

// Whether an RDMA NIC can register a GPU's memory here (GPUDirect RDMA): `detail` names the way
// ("nvidia_peermem loaded", "dma-buf (...)") or, when not possible, why.
struct GpuDirect {
  bool possible = false;
  std::string detail;
};

// One GPU as the device registry reports it (what `--device` can open), placed in the node's hwloc
// topology relative to its NICs.
struct GpuDevice {
  std::string backend;  // "cuda", "hip"
  int ordinal = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3"; "unknown" when the backend cannot say
  std::string architecture;  // "sm_90", "gfx90a"
  std::uint64_t memory_bytes = 0;
  std::string pci_bus_id;       // "0000:1b:00.0"
  std::vector<int> numa_nodes;  // OS indices of the NUMA node(s) its PCI path attaches to; empty: unknown
  std::string nearest_nic;      // "mlx5_0" (an RDMA NIC when there is one, else a network device); "" none
  std::string nic_relation;     // "same PCIe switch", "same host bridge", "same NUMA node", "cross-NUMA"
  GpuDirect gpudirect;          // for its backend on this node, RDMA NIC included
  std::string note;             // what could not be found out and why ("" when nothing)
};

// What the node probe finds; `*_note` says why a list is empty ("" when not empty).
struct NodePlatform {
  std::string cpu_model;
  std::uint64_t memory_bytes = 0;
  NodeTopology topology;
  std::string topology_note;
  std::vector<std::string> gpus;       // "cuda 0: NVIDIA H100 ..." / "hip 0: ..."
  std::string gpu_note;                // "none: cuda: <why>; hip: <why>"
  std::vector<GpuDevice> gpu_devices;  // the same GPUs in detail (not in the fingerprint)
  std::string gpudirect;               // the node's GPUDirect RDMA line (not in the fingerprint)
  std::vector<std::string> verbs_devices;
  std::string verbs_note;
  std::vector<FabricProvider> fabric_providers;
  std::string fabric_note;
  // fmt, nlohmann_json, libfabric, hwloc_api, cuda_runtime, hip_runtime
  std::map<std::string, std::string> libraries;
};

struct Platform {
  std::vector<RankPlatform> ranks;  // index = rank
  std::string provider;             // e.g. "mpi (btl self,vader)"
  std::map<std::string, std::string> libraries;
  NodePlatform node;                        // rank 0's node
  std::map<std::string, std::string> tags;  // user tags, not in the fingerprint
  // The fabric preflight (docs/fabrics.md 6.6) of commands that run fabric transports; not in the
  // fingerprint (it names hosts' errors); absent = not run.
  std::optional<fabric::FabricPreflight> fabric;
};

// FNV-1a 64 of the bytes of `text` (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
std::uint64_t fnv1a64(std::string_view text);
std::string platform_fingerprint(const Platform& platform);
// {"hostnames", "ranks": [{"rank", "host", "device", "nic"}], "provider", "libraries", "cpu_model",
//  "memory_bytes", "topology", "gpus", "gpu_devices", "gpudirect", "verbs_devices", "fabric_providers",
//  the notes, "tags", "fingerprint", and "fabric": {"requested", "chosen", "refused": [{"fabric", "reason"}]}
//  when the preflight ran}; libraries holds Platform::libraries and NodePlatform::libraries.
// Each of "gpu_devices" is {"backend", "ordinal", "name", "architecture", "memory_bytes", "pci_bus_id",
// "numa_nodes", "nearest_nic", "nic_relation", "gpudirect": {"possible", "detail"}, "note"}.
Json platform_to_json(const Platform& platform);

// One GPU for `epsuite info`: "cuda 0: NAME (sm_90, 80 GiB, PCI 0000:1b:00.0, NUMA 0, nearest NIC mlx5_0:
// same PCIe switch)"; what is unknown is left out, "no NIC" when placed without one, the note last.
std::string describe_gpu(const GpuDevice& gpu);
// The text after `gpus` in `epsuite info`: one describe_gpu line per GPU, or the one gpu_note line.
std::vector<std::string> gpu_lines(const NodePlatform& node);

// Parses `--tag` values ("gpu=H100") into a map; kInvalidArgument naming the tag otherwise.
Result<std::map<std::string, std::string>> parse_tags(const std::vector<std::string>& tags);

// Gathers every rank's host, device and NIC and probes rank 0's node (collective, bounded by `deadline`).
// A rank's device is the one `device_spec` (--device) opens on it: "cuda: NVIDIA H100 80GB HBM3 (sm_90)" or
// "cpu: <model>".
Result<Platform> discover_platform(const Deadline& deadline, std::string_view device_spec = "auto");

}  // namespace eps
