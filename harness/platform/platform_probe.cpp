#include "harness/platform/platform_probe.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#if defined(EPS_HAVE_HWLOC)
#include <hwloc.h>
#endif
#if defined(EPS_HAVE_VERBS)
#include "impls/fabric/verbs/verbs_api.hpp"
#endif
#if defined(EPS_HAVE_LIBFABRIC)
#include "impls/fabric/libfabric/fi_api.hpp"
#endif

namespace eps {
namespace {

void add_note(GpuDevice& gpu, const std::string& note) {
  gpu.note = gpu.note.empty() ? note : fmt::format("{}; {}", gpu.note, note);
}

std::string cpuinfo_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto start = line.find_first_not_of(' ', colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return "";
}

std::uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0
             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size)
             : 0;
}

#if defined(EPS_HAVE_HWLOC)
std::string version_text(unsigned v) { return fmt::format("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff); }

std::string hwloc_cpu_model(hwloc_topology_t topology) {
  hwloc_obj_t package = hwloc_get_obj_by_type(topology, HWLOC_OBJ_PACKAGE, 0);
  const char* model = package ? hwloc_obj_get_info_by_name(package, "CPUModel") : nullptr;
  return model ? model : "";
}

const char* osdev_kind(hwloc_obj_osdev_type_t type) {
  switch (type) {
    case HWLOC_OBJ_OSDEV_NETWORK:
      return "network";
    case HWLOC_OBJ_OSDEV_OPENFABRICS:
      return "openfabrics";
    case HWLOC_OBJ_OSDEV_GPU:
      return "gpu";
    case HWLOC_OBJ_OSDEV_COPROC:
      return "coproc";
    default:
      return nullptr;
  }
}

// An hwloc topology with the I/O objects epsuite looks at (bridges and PCI devices kept when they lead to
// something important, OS devices), destroyed with its owner.
class HwlocTopology {
 public:
  HwlocTopology() = default;
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  ~HwlocTopology() {
    if (topology_) hwloc_topology_destroy(topology_);
  }

  // This node's topology, or the XML document `xml` when it is not null.
  Status load(const std::string* xml) {
    if (hwloc_topology_init(&topology_) != 0) {
      topology_ = nullptr;
      return Status(StatusCode::kEnvironment,
                    fmt::format("hwloc_topology_init failed: {}", std::strerror(errno)));
    }
    hwloc_topology_set_io_types_filter(topology_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    // The length given to hwloc counts the terminating NUL, as hwloc_topology_export_xmlbuffer's does.
    if (xml &&
        hwloc_topology_set_xmlbuffer(topology_, xml->c_str(), static_cast<int>(xml->size() + 1)) != 0) {
      return invalid_argument("hwloc XML topology", "hwloc_topology_set_xmlbuffer failed: {}",
                              std::strerror(errno));
    }
    if (hwloc_topology_load(topology_) != 0) {
      const std::string why = fmt::format("hwloc_topology_load failed: {}", std::strerror(errno));
      return xml ? invalid_argument("hwloc XML topology", "{}", why) : Status(StatusCode::kEnvironment, why);
    }
    return Status();
  }

  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
};

void count_objects(hwloc_topology_t topology, NodeTopology& t) {
  t.packages = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PACKAGE);
  t.numa_nodes = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE);
  t.cores = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE);
  t.pus = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PU);
  t.pci_devices = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PCI_DEVICE);
  for (hwloc_obj_t dev = hwloc_get_next_osdev(topology, nullptr); dev;
       dev = hwloc_get_next_osdev(topology, dev)) {
    const char* kind = osdev_kind(dev->attr->osdev.type);
    if (kind && dev->name) t.io_devices.push_back(fmt::format("{} ({})", dev->name, kind));
  }
  std::sort(t.io_devices.begin(), t.io_devices.end());
}

// A NIC a GPU may talk through: the PCI device of an OS device of type openfabrics (RDMA) or network,
// named after its RDMA device when it has one ("mlx5_0" rather than "ib0").
struct NicCandidate {
  hwloc_obj_t pci = nullptr;
  std::string name;
  bool rdma = false;
};

hwloc_obj_t pci_device_above(hwloc_obj_t obj) {
  while (obj && obj->type != HWLOC_OBJ_PCI_DEVICE) obj = obj->parent;
  return obj;
}

void name_candidate(NicCandidate& nic, const std::string& name, bool rdma) {
  const bool better_kind = rdma && !nic.rdma;
  const bool same_kind_smaller_name = rdma == nic.rdma && (nic.name.empty() || name < nic.name);
  if (better_kind || same_kind_smaller_name) {
    nic.name = name;
    nic.rdma = rdma;
  }
}

// The RDMA NICs when there is one (GPUDirect needs one), else the network devices; each PCI device once.
std::vector<NicCandidate> nic_candidates(hwloc_topology_t topology) {
  std::vector<NicCandidate> all;
  for (hwloc_obj_t dev = hwloc_get_next_osdev(topology, nullptr); dev;
       dev = hwloc_get_next_osdev(topology, dev)) {
    const hwloc_obj_osdev_type_t type = dev->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_OPENFABRICS && type != HWLOC_OBJ_OSDEV_NETWORK) continue;
    hwloc_obj_t pci = pci_device_above(dev);
    if (!pci || !dev->name) continue;
    auto it = std::find_if(all.begin(), all.end(), [pci](const NicCandidate& c) { return c.pci == pci; });
    if (it == all.end()) it = all.insert(all.end(), NicCandidate{pci, "", false});
    name_candidate(*it, dev->name, type == HWLOC_OBJ_OSDEV_OPENFABRICS);
  }
  const bool any_rdma = std::any_of(all.begin(), all.end(), [](const NicCandidate& c) { return c.rdma; });
  if (any_rdma) std::erase_if(all, [](const NicCandidate& c) { return !c.rdma; });
  return all;
}

// hwloc_get_common_ancestor_obj compares depths, which I/O objects do not have; this walks parents.
hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b) {
  for (hwloc_obj_t x = a; x; x = x->parent) {
    for (hwloc_obj_t y = b; y; y = y->parent) {
      if (x == y) return x;
    }
  }
  return nullptr;
}

PcieJoin join_at(hwloc_obj_t common) {
  if (common && common->type == HWLOC_OBJ_PCI_DEVICE) return PcieJoin::kPciBridge;  // functions of one device
  if (!common || common->type != HWLOC_OBJ_BRIDGE) return PcieJoin::kCpuSide;
  return common->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ? PcieJoin::kHostBridge
                                                                     : PcieJoin::kPciBridge;
}

// The NUMA nodes an I/O object is local to: those of its first ancestor outside the I/O tree.
hwloc_const_nodeset_t local_nodes(hwloc_topology_t topology, hwloc_obj_t io) {
  hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(topology, io);
  return ancestor ? ancestor->nodeset : nullptr;
}

std::vector<int> node_indices(hwloc_const_nodeset_t nodes) {
  std::vector<int> out;
  if (!nodes) return out;
  for (int index = hwloc_bitmap_first(nodes); index != -1; index = hwloc_bitmap_next(nodes, index)) {
    out.push_back(index);
  }
  return out;
}

PcieRelation relation_between(hwloc_topology_t topology, hwloc_obj_t gpu, hwloc_obj_t nic) {
  hwloc_const_nodeset_t gpu_nodes = local_nodes(topology, gpu);
  hwloc_const_nodeset_t nic_nodes = local_nodes(topology, nic);
  const bool share_numa_node = gpu_nodes && nic_nodes && hwloc_bitmap_intersects(gpu_nodes, nic_nodes);
  return classify_pcie_relation(join_at(common_ancestor(gpu, nic)), share_numa_node);
}

void place_gpu(hwloc_topology_t topology, const std::vector<NicCandidate>& nics, GpuDevice& gpu) {
  if (gpu.pci_bus_id.empty()) {
    add_note(gpu, "not placed: the backend reports no PCI bus id");
    return;
  }
  hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(topology, gpu.pci_bus_id.c_str());
  if (!pci) {
    add_note(gpu, fmt::format("not placed: PCI {} is not in the hwloc topology", gpu.pci_bus_id));
    return;
  }
  gpu.numa_nodes = node_indices(local_nodes(topology, pci));
  const NicCandidate* nearest = nullptr;
  PcieRelation nearest_relation = PcieRelation::kCrossNuma;
  for (const NicCandidate& nic : nics) {
    const PcieRelation relation = relation_between(topology, pci, nic.pci);
    const bool closer =
        !nearest || relation < nearest_relation || (relation == nearest_relation && nic.name < nearest->name);
    if (closer) {
      nearest = &nic;
      nearest_relation = relation;
    }
  }
  if (!nearest) return;
  gpu.nearest_nic = nearest->name;
  gpu.nic_relation = std::string(pcie_relation_name(nearest_relation));
}

void place_gpus(hwloc_topology_t topology, std::vector<GpuDevice>& gpus) {
  const std::vector<NicCandidate> nics = nic_candidates(topology);
  for (GpuDevice& gpu : gpus) place_gpu(topology, nics, gpu);
}

// Counts, CPU model and the placement of node.gpu_devices, from one load of this node's topology.
void probe_hwloc(NodePlatform& node) {
  node.libraries["hwloc_api"] = version_text(hwloc_get_api_version());
  HwlocTopology topology;
  if (const Status loaded = topology.load(nullptr); !loaded.ok()) {
    node.topology_note = loaded.message();
    for (GpuDevice& gpu : node.gpu_devices) add_note(gpu, "not placed: " + node.topology_note);
    return;
  }
  count_objects(topology.get(), node.topology);
  node.cpu_model = hwloc_cpu_model(topology.get());
  place_gpus(topology.get(), node.gpu_devices);
}
#endif

#if defined(EPS_HAVE_LIBFABRIC)
const char* endpoint_name(fi_ep_type type) {
  switch (type) {
    case FI_EP_MSG:
      return "FI_EP_MSG";
    case FI_EP_DGRAM:
      return "FI_EP_DGRAM";
    case FI_EP_RDM:
      return "FI_EP_RDM";
    default:
      return "FI_EP_OTHER";
  }
}

std::vector<std::string> order_flags(std::uint64_t order) {
  static const std::pair<std::uint64_t, const char*> kFlags[] = {
      {FI_ORDER_RAR, "FI_ORDER_RAR"},  {FI_ORDER_RAW, "FI_ORDER_RAW"}, {FI_ORDER_RAS, "FI_ORDER_RAS"},
      {FI_ORDER_WAR, "FI_ORDER_WAR"},  {FI_ORDER_WAW, "FI_ORDER_WAW"}, {FI_ORDER_WAS, "FI_ORDER_WAS"},
      {FI_ORDER_SAR, "FI_ORDER_SAR"},  {FI_ORDER_SAW, "FI_ORDER_SAW"}, {FI_ORDER_SAS, "FI_ORDER_SAS"},
      {FI_ORDER_DATA, "FI_ORDER_DATA"}};
  std::vector<std::string> out;
  for (const auto& [bit, name] : kFlags) {
    if (order & bit) out.push_back(name);
  }
  return out;
}

void probe_libfabric(NodePlatform& node) {
  const Result<const fabric::ofi::FiApi*> loaded = fabric::ofi::fi_api();
  if (!loaded.ok()) {
    node.fabric_note = loaded.status().message();
    return;
  }
  const fabric::ofi::FiApi& fi = **loaded;
  const std::uint32_t version = fi.version();
  node.libraries["libfabric"] = fmt::format("{}.{}", FI_MAJOR(version), FI_MINOR(version));
  fi_info* hints = fi.allocinfo();
  if (!hints) {
    node.fabric_note = "fi_allocinfo failed: out of memory";
    return;
  }
  // Accept every mode and memory-registration mode so that every provider is listed, as fi_info does.
  hints->mode = ~0ULL;
  hints->domain_attr->mode = ~0ULL;
  hints->domain_attr->mr_mode = ~(FI_MR_BASIC | FI_MR_SCALABLE);
  fi_info* info = nullptr;
  const int rc =
      fi.getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints, &info);
  fi.freeinfo(hints);
  if (rc != 0) {
    node.fabric_note = fmt::format("fi_getinfo: {}", fi.strerror(-rc));
    return;
  }
  std::map<std::pair<std::string, std::string>, FabricProvider> merged;
  for (const fi_info* i = info; i; i = i->next) {
    const std::string name =
        i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "unknown";
    const std::string endpoint = i->ep_attr ? endpoint_name(i->ep_attr->type) : "FI_EP_UNSPEC";
    FabricProvider& p = merged[{name, endpoint}];
    p.name = name;
    p.endpoint = endpoint;
    if (i->domain_attr) {
      p.cq_data_size = std::max<std::uint64_t>(p.cq_data_size, i->domain_attr->cq_data_size);
      if (i->domain_attr->name &&
          std::find(p.domains.begin(), p.domains.end(), i->domain_attr->name) == p.domains.end())
        p.domains.push_back(i->domain_attr->name);
    }
    if (i->tx_attr) p.msg_order = order_flags(i->tx_attr->msg_order);
  }
  fi.freeinfo(info);
  for (auto& [key, provider] : merged) {
    std::sort(provider.domains.begin(), provider.domains.end());
    node.fabric_providers.push_back(std::move(provider));
  }
  if (node.fabric_providers.empty()) node.fabric_note = "fi_getinfo returned no providers";
}
#endif

// "cuda: <why>" from a backend's count() error; the plugin loader's messages already start so.
std::string backend_reason(const std::string& backend, const std::string& message) {
  return message.rfind(backend + ": ", 0) == 0 ? message : fmt::format("{}: {}", backend, message);
}

// The backend's description of the device without opening it; a backend without one opens the device.
Result<device::DeviceProperties> describe_device(const device::DeviceBackend& backend, int ordinal) {
  if (backend.properties) return backend.properties(ordinal);
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<device::Device> opened, backend.open(ordinal));
  return opened->properties();
}

GpuDevice gpu_record(const device::DeviceBackend& backend, int ordinal) {
  GpuDevice gpu;
  gpu.backend = backend.name;
  gpu.ordinal = ordinal;
  Result<device::DeviceProperties> properties = describe_device(backend, ordinal);
  if (!properties.ok()) {
    gpu.name = "unknown";
    gpu.note = properties.status().message();
    return gpu;
  }
  gpu.name = properties->name.empty() ? "unknown" : properties->name;
  gpu.architecture = properties->architecture;
  gpu.memory_bytes = properties->memory_bytes;
  gpu.pci_bus_id = properties->pci_bus_id;
  return gpu;
}

// GPUDirect RDMA (platform_probe.hpp).

bool path_exists(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

// The first line of a small text file, "" when it cannot be read.
std::string first_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool module_loaded(const std::filesystem::path& root, std::string_view module) {
  return path_exists(root / "sys/module" / module);
}

GpuDirect possible(std::string detail) { return {true, std::move(detail)}; }
GpuDirect not_possible(std::string why) { return {false, std::move(why)}; }

// Why dma-buf registration is out ("" when it is not): the kernel's release, then `driver_why`.
std::string dma_buf_obstacle(const std::string& release, const std::string& driver_why) {
  if (release.empty()) return "dma-buf: the kernel release is unknown (proc/sys/kernel/osrelease)";
  if (!kernel_registers_dma_buf(release))
    return fmt::format("dma-buf: kernel {} is older than 5.12", release);
  return driver_why;
}

GpuDirect nvidia_gpudirect(const std::filesystem::path& root) {
  if (!module_loaded(root, "nvidia")) return not_possible("the nvidia kernel module is not loaded");
  if (module_loaded(root, "nvidia_peermem")) return possible("nvidia_peermem loaded");
  if (module_loaded(root, "nv_peer_mem")) return possible("nv_peer_mem loaded");
  const std::string release = first_line(root / "proc/sys/kernel/osrelease");
  const bool open_module =
      first_line(root / "proc/driver/nvidia/version").find("Open Kernel Module") != std::string::npos;
  const std::string obstacle = dma_buf_obstacle(
      release, open_module ? "" : "dma-buf: the nvidia kernel module is not NVIDIA's open one");
  if (obstacle.empty())
    return possible(fmt::format("dma-buf (NVIDIA open kernel module, kernel {})", release));
  return not_possible(fmt::format("nvidia_peermem is not loaded; {}", obstacle));
}

GpuDirect amd_gpudirect(const std::filesystem::path& root) {
  if (!module_loaded(root, "amdgpu")) return not_possible("the amdgpu kernel module is not loaded");
  const std::string release = first_line(root / "proc/sys/kernel/osrelease");
  const std::string obstacle = dma_buf_obstacle(release, "");
  if (obstacle.empty()) return possible(fmt::format("dma-buf (amdgpu, kernel {})", release));
  return not_possible(obstacle);
}

std::string gpudirect_text(const GpuDirect& g) { return g.possible ? g.detail : "not possible: " + g.detail; }

bool has_rdma_device(const NodePlatform& node) {
  if (!node.verbs_devices.empty()) return true;
  const std::vector<std::string>& io = node.topology.io_devices;
  return std::any_of(io.begin(), io.end(),
                     [](const std::string& d) { return d.find("(openfabrics)") != std::string::npos; });
}

void probe_node_gpudirect(NodePlatform& node) {
  for (GpuDevice& gpu : node.gpu_devices) {
    gpu.gpudirect = with_rdma_device(probe_gpudirect(gpu.backend, "/"), has_rdma_device(node));
  }
  node.gpudirect = gpudirect_summary(node.gpu_devices);
}

}  // namespace

std::string probe_cpu_model() {
  const std::string model = cpuinfo_model();
  return model.empty() ? "unknown" : model;
}

std::vector<std::string> probe_verbs_devices(std::string& note) {
  std::vector<std::string> names;
#if defined(EPS_HAVE_VERBS)
  const Result<const fabric::verbs::VerbsApi*> loaded = fabric::verbs::verbs_api();
  if (!loaded.ok()) {
    note = loaded.status().message();
    return names;
  }
  const fabric::verbs::VerbsApi& ibv = **loaded;
  int count = 0;
  ibv_device** list = ibv.get_device_list(&count);
  if (!list) {
    // ENOSYS: the kernel has no RDMA subsystem, i.e. no device either.
    note = fmt::format("no RDMA devices: ibv_get_device_list: {}", std::strerror(errno));
    return names;
  }
  for (int i = 0; i < count; ++i) names.push_back(ibv.get_device_name(list[i]));
  ibv.free_device_list(list);
  std::sort(names.begin(), names.end());
  note = names.empty() ? "no RDMA devices: ibv_get_device_list returned none" : "";
#else
  note = "epsuite was built without ibverbs (EPSUITE_WITH_VERBS)";
#endif
  return names;
}

void probe_gpus(const device::DeviceRegistry& registry, NodePlatform& node) {
  std::vector<std::string> reasons;
  for (const device::DeviceBackend& backend : registry.backends()) {
    if (backend.host) continue;  // cpu, cpu-isolated: no GPU
    const Result<int> count = backend.count();
    if (!count.ok()) {
      reasons.push_back(backend_reason(backend.name, count.status().message()));
    } else if (*count == 0) {
      reasons.push_back(fmt::format("{}: no device", backend.name));
    }
    for (int ordinal = 0; count.ok() && ordinal < *count; ++ordinal) {
      node.gpu_devices.push_back(gpu_record(backend, ordinal));
    }
  }
  for (const GpuDevice& gpu : node.gpu_devices) {
    node.gpus.push_back(fmt::format("{} {}: {}", gpu.backend, gpu.ordinal, gpu.name));
  }
  if (!node.gpus.empty()) return;
  node.gpu_note = reasons.empty() ? "none: no GPU backend is registered"
                                  : fmt::format("none: {}", fmt::join(reasons, "; "));
}

PcieRelation classify_pcie_relation(PcieJoin join, bool share_numa_node) {
  switch (join) {
    case PcieJoin::kPciBridge:
      return PcieRelation::kSamePcieSwitch;
    case PcieJoin::kHostBridge:
      return PcieRelation::kSameHostBridge;
    case PcieJoin::kCpuSide:
      break;
  }
  return share_numa_node ? PcieRelation::kSameNumaNode : PcieRelation::kCrossNuma;
}

std::string_view pcie_relation_name(PcieRelation relation) {
  switch (relation) {
    case PcieRelation::kSamePcieSwitch:
      return "same PCIe switch";
    case PcieRelation::kSameHostBridge:
      return "same host bridge";
    case PcieRelation::kSameNumaNode:
      return "same NUMA node";
    case PcieRelation::kCrossNuma:
      return "cross-NUMA";
  }
  return "unknown";
}

Status place_gpus_in_xml_topology(std::string_view xml, std::vector<GpuDevice>& gpus) {
#if defined(EPS_HAVE_HWLOC)
  const std::string document(xml);
  HwlocTopology topology;
  EPS_RETURN_IF_ERROR(topology.load(&document));
  place_gpus(topology.get(), gpus);
  return Status();
#else
  (void)xml;
  (void)gpus;
  return Status(StatusCode::kUnavailable, "epsuite was built without hwloc (libhwloc-dev)");
#endif
}

GpuDirect probe_gpudirect(std::string_view backend, const std::filesystem::path& root) {
  if (backend == "cuda") return nvidia_gpudirect(root);
  if (backend == "hip") return amd_gpudirect(root);
  return not_possible(fmt::format("no GPUDirect RDMA check for backend '{}'", backend));
}

GpuDirect with_rdma_device(GpuDirect kernel_side, bool has_rdma_device) {
  if (has_rdma_device) return kernel_side;
  return not_possible(fmt::format("no RDMA device; {}", gpudirect_text(kernel_side)));
}

bool kernel_registers_dma_buf(std::string_view release) {
  int major = 0;
  int minor = 0;
  const char* end = release.data() + release.size();
  const auto [after_major, major_error] = std::from_chars(release.data(), end, major);
  if (major_error != std::errc() || after_major == end || *after_major != '.') return false;
  const auto [after_minor, minor_error] = std::from_chars(after_major + 1, end, minor);
  if (minor_error != std::errc()) return false;
  return major > 5 || (major == 5 && minor >= 12);
}

std::string gpudirect_summary(const std::vector<GpuDevice>& gpus) {
  if (gpus.empty()) return "not possible: no GPU";
  std::vector<std::pair<std::string, std::string>> verdicts;  // backend, text; in first-seen order
  for (const GpuDevice& gpu : gpus) {
    const bool seen = std::any_of(verdicts.begin(), verdicts.end(),
                                  [&gpu](const auto& v) { return v.first == gpu.backend; });
    if (!seen) verdicts.emplace_back(gpu.backend, gpudirect_text(gpu.gpudirect));
  }
  if (verdicts.size() == 1) return verdicts.front().second;
  std::vector<std::string> parts;
  for (const auto& [backend, text] : verdicts) parts.push_back(fmt::format("{}: {}", backend, text));
  return fmt::format("{}", fmt::join(parts, "; "));
}

NodePlatform probe_node() {
  NodePlatform node;
  node.libraries["fmt"] =
      fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100);
  node.libraries["nlohmann_json"] = fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR,
                                                NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH);
  probe_gpus(device::device_registry(), node);  // before hwloc, which places them
#if defined(EPS_HAVE_HWLOC)
  probe_hwloc(node);
#else
  node.topology_note = "epsuite was built without hwloc (libhwloc-dev)";
  for (GpuDevice& gpu : node.gpu_devices) add_note(gpu, "not placed: " + node.topology_note);
#endif
  if (node.cpu_model.empty()) node.cpu_model = probe_cpu_model();
  node.memory_bytes = physical_memory();
  node.verbs_devices = probe_verbs_devices(node.verbs_note);
  probe_node_gpudirect(node);  // after the verbs devices: GPUDirect needs an RDMA NIC
#if defined(EPS_HAVE_LIBFABRIC)
  probe_libfabric(node);
#else
  node.fabric_note = "epsuite was built without libfabric (EPSUITE_WITH_LIBFABRIC)";
#endif
  return node;
}

}  // namespace eps
