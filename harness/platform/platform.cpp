#include "harness/platform/platform.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace eps {

std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : text) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

namespace {

Json preflight_json(const fabric::FabricPreflight& preflight) {
  Json refused = Json::array();
  for (const fabric::FabricRefusal& r : preflight.choice.refused) {
    refused.push_back({{"fabric", r.fabric}, {"reason", r.reason}});
  }
  return Json{{"requested", preflight.requested}, {"chosen", preflight.choice.chosen}, {"refused", refused}};
}

std::map<std::string, std::string> all_libraries(const Platform& p) {
  std::map<std::string, std::string> libraries = p.node.libraries;
  for (const auto& [name, version] : p.libraries) libraries[name] = version;
  return libraries;
}

Json topology_json(const NodeTopology& t) {
  return Json{{"packages", t.packages}, {"numa_nodes", t.numa_nodes},   {"cores", t.cores},
              {"pus", t.pus},           {"pci_devices", t.pci_devices}, {"io_devices", t.io_devices}};
}

Json providers_json(const std::vector<FabricProvider>& providers, bool with_domains) {
  Json out = Json::array();
  for (const FabricProvider& f : providers) {
    Json j{{"name", f.name},
           {"endpoint", f.endpoint},
           {"cq_data_size", f.cq_data_size},
           {"msg_order", f.msg_order}};
    if (with_domains) j["domains"] = f.domains;
    out.push_back(std::move(j));
  }
  return out;
}

Json gpu_device_json(const GpuDevice& g) {
  return Json{{"backend", g.backend},
              {"ordinal", g.ordinal},
              {"name", g.name},
              {"architecture", g.architecture},
              {"memory_bytes", g.memory_bytes},
              {"pci_bus_id", g.pci_bus_id},
              {"numa_nodes", g.numa_nodes},
              {"nearest_nic", g.nearest_nic},
              {"nic_relation", g.nic_relation},
              {"gpudirect", {{"possible", g.gpudirect.possible}, {"detail", g.gpudirect.detail}}},
              {"note", g.note}};
}

Json gpu_devices_json(const std::vector<GpuDevice>& gpus) {
  Json out = Json::array();
  for (const GpuDevice& g : gpus) out.push_back(gpu_device_json(g));
  return out;
}

// "NIC mlx5_0: same PCIe switch", "no NIC", or nothing when the GPU could not be placed at all.
std::string nic_text(const GpuDevice& g) {
  if (!g.nearest_nic.empty()) return fmt::format("nearest NIC {}: {}", g.nearest_nic, g.nic_relation);
  return g.numa_nodes.empty() ? "" : "no NIC";
}

Json identity(const Platform& p) {
  Json ranks = Json::array();
  for (const RankPlatform& r : p.ranks) ranks.push_back({{"device", r.device}, {"nic", r.nic}});
  const NodePlatform& n = p.node;
  // Whole GiB: the kernel's reservations make the byte count wobble between identical nodes.
  const std::uint64_t memory_gib = (n.memory_bytes + (1ULL << 29)) >> 30;
  return Json{{"ranks", ranks},
              {"provider", p.provider},
              {"libraries", all_libraries(p)},
              {"cpu_model", n.cpu_model},
              {"memory_gib", memory_gib},
              {"topology", topology_json(n.topology)},
              {"gpus", n.gpus},
              {"verbs_devices", n.verbs_devices},
              {"fabric_providers", providers_json(n.fabric_providers, false)}};
}

bool valid_tag_key(std::string_view key) {
  return !key.empty() && key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

bool valid_tag_value(std::string_view value) {
  return !value.empty() && value.size() <= 256 &&
         std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

}  // namespace

std::string platform_fingerprint(const Platform& platform) {
  // nlohmann's dump() orders object keys, so the text is canonical.
  return fmt::format("{:016x}", fnv1a64(identity(platform).dump()));
}

Json platform_to_json(const Platform& platform) {
  Json hostnames = Json::array();
  Json ranks = Json::array();
  for (std::size_t r = 0; r < platform.ranks.size(); ++r) {
    const RankPlatform& rp = platform.ranks[r];
    hostnames.push_back(rp.host);
    ranks.push_back({{"rank", r}, {"host", rp.host}, {"device", rp.device}, {"nic", rp.nic}});
  }
  const NodePlatform& n = platform.node;
  Json out{{"hostnames", hostnames},
           {"ranks", ranks},
           {"provider", platform.provider},
           {"libraries", all_libraries(platform)},
           {"cpu_model", n.cpu_model},
           {"memory_bytes", n.memory_bytes},
           {"topology", topology_json(n.topology)},
           {"topology_note", n.topology_note},
           {"gpus", n.gpus},
           {"gpu_note", n.gpu_note},
           {"gpu_devices", gpu_devices_json(n.gpu_devices)},
           {"gpudirect", n.gpudirect},
           {"verbs_devices", n.verbs_devices},
           {"verbs_note", n.verbs_note},
           {"fabric_providers", providers_json(n.fabric_providers, true)},
           {"fabric_note", n.fabric_note},
           {"tags", platform.tags},
           {"fingerprint", platform_fingerprint(platform)}};
  if (platform.fabric) out["fabric"] = preflight_json(*platform.fabric);
  return out;
}

std::string describe_gpu(const GpuDevice& gpu) {
  std::vector<std::string> facts;
  if (!gpu.architecture.empty()) facts.push_back(gpu.architecture);
  // Rounded: an "80 GB" part reports a little less than 80 GiB.
  if (gpu.memory_bytes > 0) facts.push_back(fmt::format("{} GiB", (gpu.memory_bytes + (1ULL << 29)) >> 30));
  if (!gpu.pci_bus_id.empty()) facts.push_back("PCI " + gpu.pci_bus_id);
  if (!gpu.numa_nodes.empty()) facts.push_back(fmt::format("NUMA {}", fmt::join(gpu.numa_nodes, ",")));
  if (std::string nic = nic_text(gpu); !nic.empty()) facts.push_back(std::move(nic));
  if (!gpu.note.empty()) facts.push_back(gpu.note);
  std::string text = fmt::format("{} {}: {}", gpu.backend, gpu.ordinal, gpu.name);
  return facts.empty() ? text : fmt::format("{} ({})", text, fmt::join(facts, ", "));
}

std::vector<std::string> gpu_lines(const NodePlatform& node) {
  if (node.gpu_devices.empty())
    return {node.gpus.empty() ? node.gpu_note : fmt::format("{}", fmt::join(node.gpus, ", "))};
  std::vector<std::string> lines;
  for (const GpuDevice& gpu : node.gpu_devices) lines.push_back(describe_gpu(gpu));
  return lines;
}

Result<std::map<std::string, std::string>> parse_tags(const std::vector<std::string>& tags) {
  std::map<std::string, std::string> out;
  for (const std::string& tag : tags) {
    const std::size_t eq = tag.find('=');
    if (eq == std::string::npos) return invalid_argument("--tag", "expected key=value, got '{}'", tag);
    const std::string key = tag.substr(0, eq);
    const std::string value = tag.substr(eq + 1);
    if (!valid_tag_key(key)) {
      return invalid_argument("--tag", "key must be 1-64 characters of [A-Za-z0-9_.-], got '{}'", key);
    }
    if (!valid_tag_value(value)) {
      return invalid_argument(fmt::format("--tag {}", key),
                              "value must be 1-256 printable characters, got '{}'", value);
    }
    if (!out.emplace(key, value).second) return invalid_argument("--tag", "key '{}' given twice", key);
  }
  return out;
}

}  // namespace eps
