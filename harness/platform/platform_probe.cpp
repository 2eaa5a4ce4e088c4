#include "harness/platform/platform_probe.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "reference/common/version.hpp"

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

void probe_hwloc(NodePlatform& node) {
  node.libraries["hwloc_api"] = version_text(hwloc_get_api_version());
  hwloc_topology_t topology;
  if (hwloc_topology_init(&topology) != 0) {
    node.topology_note = fmt::format("hwloc_topology_init failed: {}", std::strerror(errno));
    return;
  }
  hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topology) != 0) {
    node.topology_note = fmt::format("hwloc_topology_load failed: {}", std::strerror(errno));
    hwloc_topology_destroy(topology);
    return;
  }
  NodeTopology& t = node.topology;
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
  node.cpu_model = hwloc_cpu_model(topology);
  hwloc_topology_destroy(topology);
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

// The runtime libraries are left loaded: unloading them would run their destructors under live
// atexit handlers.
void* open_first(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  return nullptr;
}

template <typename F>
F symbol(void* handle, const char* name) {
  return handle ? reinterpret_cast<F>(dlsym(handle, name)) : nullptr;
}

std::string cuda_version(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// CUDA runtime for the count and versions; the driver library for names (cudart has no name call that
// is stable across versions).
std::string probe_cuda(NodePlatform& node) {
  void* cudart = open_first({"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"});
  if (!cudart) return "cuda: runtime library libcudart not found";
  using IntOut = int (*)(int*);
  auto runtime_version = symbol<IntOut>(cudart, "cudaRuntimeGetVersion");
  auto device_count = symbol<IntOut>(cudart, "cudaGetDeviceCount");
  auto error_string = symbol<const char* (*)(int)>(cudart, "cudaGetErrorString");
  if (!runtime_version || !device_count || !error_string) return "cuda: libcudart lacks cudaGetDeviceCount";
  int version = 0;
  if (runtime_version(&version) == 0) node.libraries["cuda_runtime"] = cuda_version(version);
  int count = 0;
  if (const int rc = device_count(&count); rc != 0) return fmt::format("cuda: {}", error_string(rc));
  void* driver = open_first({"libcuda.so.1", "libcuda.so"});
  auto init = symbol<int (*)(unsigned)>(driver, "cuInit");
  auto device_name = symbol<int (*)(char*, int, int)>(driver, "cuDeviceGetName");
  const bool named = init && device_name && init(0) == 0;
  for (int d = 0; d < count; ++d) {
    char name[256] = "unknown";
    if (named && device_name(name, sizeof(name), d) != 0) std::strcpy(name, "unknown");
    node.gpus.push_back(fmt::format("cuda {}: {}", d, name));
  }
  return count == 0 ? "cuda: no device" : "";
}

std::string probe_hip(NodePlatform& node) {
  void* hip = open_first({"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"});
  if (!hip) return "hip: runtime library libamdhip64 not found";
  using IntOut = int (*)(int*);
  auto runtime_version = symbol<IntOut>(hip, "hipRuntimeGetVersion");
  auto device_count = symbol<IntOut>(hip, "hipGetDeviceCount");
  auto device_name = symbol<int (*)(char*, int, int)>(hip, "hipDeviceGetName");
  auto error_string = symbol<const char* (*)(int)>(hip, "hipGetErrorString");
  if (!device_count || !error_string) return "hip: libamdhip64 lacks hipGetDeviceCount";
  int version = 0;
  // HIP_VERSION = major * 10^7 + minor * 10^5 + patch.
  if (runtime_version && runtime_version(&version) == 0) {
    node.libraries["hip_runtime"] =
        fmt::format("{}.{}.{}", version / 10000000, version / 100000 % 100, version % 100000);
  }
  int count = 0;
  if (const int rc = device_count(&count); rc != 0) return fmt::format("hip: {}", error_string(rc));
  for (int d = 0; d < count; ++d) {
    char name[256] = "unknown";
    if (!device_name || device_name(name, sizeof(name), d) != 0) std::strcpy(name, "unknown");
    node.gpus.push_back(fmt::format("hip {}: {}", d, name));
  }
  return count == 0 ? "hip: no device" : "";
}

void probe_gpus(NodePlatform& node) {
  std::vector<std::string> reasons;
  if (kWithCuda) reasons.push_back(probe_cuda(node));
  if (kWithHip) reasons.push_back(probe_hip(node));
  if (!node.gpus.empty()) return;
  std::erase(reasons, std::string());
  node.gpu_note = reasons.empty() ? "none: epsuite was built without CUDA and HIP"
                                  : fmt::format("none: {}", fmt::join(reasons, "; "));
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

NodePlatform probe_node() {
  NodePlatform node;
  node.libraries["fmt"] =
      fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100);
  node.libraries["nlohmann_json"] = fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR,
                                                NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH);
#if defined(EPS_HAVE_HWLOC)
  probe_hwloc(node);
#else
  node.topology_note = "epsuite was built without hwloc (libhwloc-dev)";
#endif
  if (node.cpu_model.empty()) node.cpu_model = probe_cpu_model();
  node.memory_bytes = physical_memory();
  probe_gpus(node);
  node.verbs_devices = probe_verbs_devices(node.verbs_note);
#if defined(EPS_HAVE_LIBFABRIC)
  probe_libfabric(node);
#else
  node.fabric_note = "epsuite was built without libfabric (EPSUITE_WITH_LIBFABRIC)";
#endif
  return node;
}

}  // namespace eps
