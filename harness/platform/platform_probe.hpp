// Probes of the local node for the platform record (docs/results.md 9.1; harness/platform.hpp), without MPI.
//
// - CPU model: hwloc's CPUModel of the first package, else /proc/cpuinfo "model name", else "unknown".
// - Memory: physical pages x page size (sysconf), bytes.
// - Topology: hwloc object counts (packages, NUMA nodes, cores, PUs, PCI devices) and the OS devices of
//   type network, openfabrics, GPU and coprocessor; empty with a note when epsuite has no hwloc.
// - GPUs: from the device registry (impls/device/device_registry.hpp), so that what `--device` can open is
//   what info lists: every backend but `cpu` is counted and each device described (the backend's
//   `properties`, else the device opened); "none: cuda: <why>; hip: <why>" when there is none. Each GPU is
//   placed in the hwloc topology (NUMA node, nearest NIC and the relation to it) and given the node's
//   GPUDirect RDMA verdict for its backend.
// - Verbs devices: ibv_get_device_list when built with ibverbs (EPS_HAVE_VERBS).
// - libfabric providers: fi_getinfo with no node, no service and no flags (a local query: nothing is
//   resolved or sent), one entry per provider and endpoint type, when built with libfabric.
//   libibverbs and libfabric are loaded at run time too (verbs_api.hpp, fi_api.hpp); where one cannot be
//   loaded, its list is empty with the loader's message as the note.
// - Library versions: fmt, nlohmann_json, hwloc_api (hwloc_get_api_version), libfabric (fi_version).
// Every probe that finds nothing says why in its `*_note`; no probe fails the run.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "harness/platform/platform.hpp"
#include "impls/device/device_registry.hpp"
#include "reference/common/status.hpp"

namespace eps {

std::string probe_cpu_model();
// Verbs device names, sorted; `note` says why the list is empty ("" otherwise).
std::vector<std::string> probe_verbs_devices(std::string& note);
NodePlatform probe_node();

// Fills node.gpus, node.gpu_devices (unplaced, no GPUDirect verdict) and node.gpu_note from every backend
// of `registry` but `cpu`, in registry order. A backend whose count() fails gives its reason to the note
// (prefixed with its name unless the message already is); a device whose description fails is listed as
// "unknown" with the error in its note.
void probe_gpus(const device::DeviceRegistry& registry, NodePlatform& node);

// Placement (hwloc).

// How a GPU reaches a NIC, nearest first: both behind one PCI-PCI bridge (a PCIe switch; a root port has a
// single link, so two devices behind one have a switch between), meeting at a host bridge, attached to the
// same NUMA node through different host bridges, or attached to different NUMA nodes.
enum class PcieRelation { kSamePcieSwitch, kSameHostBridge, kSameNumaNode, kCrossNuma };
// Where the PCI paths of two devices meet: at a PCI-PCI bridge (or in one device), at a host bridge, or
// only above the I/O tree (a package, a group, the machine).
enum class PcieJoin { kPciBridge, kHostBridge, kCpuSide };

PcieRelation classify_pcie_relation(PcieJoin join, bool share_numa_node);
// "same PCIe switch", "same host bridge", "same NUMA node", "cross-NUMA".
std::string_view pcie_relation_name(PcieRelation relation);

// Places every GPU of `gpus` by its pci_bus_id in the hwloc topology of the XML document `xml`
// (hwloc_topology_set_xmlbuffer, I/O objects kept as on this node), exactly as probe_node does with the
// node's own topology: numa_nodes, nearest_nic and nic_relation, or a note saying why the GPU could not be
// placed. Errors: kUnavailable without hwloc; kInvalidArgument when hwloc cannot read the XML.
Status place_gpus_in_xml_topology(std::string_view xml, std::vector<GpuDevice>& gpus);

// GPUDirect RDMA.

// Whether the kernel lets an RDMA NIC register `backend` GPU memory, read from the file system under
// `root` ("/" here; tests pass a directory tree):
// - cuda: the nvidia module must be loaded (sys/module/nvidia); then nvidia_peermem loaded
//   (sys/module/nvidia_peermem) or the legacy nv_peer_mem (sys/module/nv_peer_mem), else dma-buf, which
//   needs a kernel of at least 5.12 (proc/sys/kernel/osrelease) and NVIDIA's open kernel module
//   (proc/driver/nvidia/version says "Open Kernel Module").
// - hip: the amdgpu module must be loaded (sys/module/amdgpu); peer memory then goes through dma-buf, which
//   needs a kernel of at least 5.12.
// - any other backend: not possible ("no GPUDirect RDMA check for backend 'x'").
// The NIC side is not looked at here (with_rdma_device).
GpuDirect probe_gpudirect(std::string_view backend, const std::filesystem::path& root);
// `kernel_side` when the node has an RDMA device, else not possible: "no RDMA device; <kernel side>".
GpuDirect with_rdma_device(GpuDirect kernel_side, bool has_rdma_device);
// True for a kernel release ("6.1.0-18-amd64") of at least 5.12, the first to register dma-buf memory with
// an RDMA NIC (ibv_reg_dmabuf_mr); false when the text does not start with major.minor.
bool kernel_registers_dma_buf(std::string_view release);
// The node's `gpudirect` line: "not possible: no GPU" without GPUs; else the verdict of each backend that
// has GPUs ("nvidia_peermem loaded", "not possible: <why>"), prefixed "cuda: " etc. when several do.
std::string gpudirect_summary(const std::vector<GpuDevice>& gpus);

}  // namespace eps
