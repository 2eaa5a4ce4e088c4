#include "impls/transport/plugin/plugin_library.hpp"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "impls/runtime/dynamic_library.hpp"

namespace eps::transport {
namespace {

constexpr std::string_view kSpecField = "--transport";

bool has(std::uint32_t mask, int value) { return (mask & EPS_PLUGIN_BIT(value)) != 0; }

Status refused(std::string_view what, std::string_view why) {
  return invalid_argument(kSpecField, "plugin {}: {}", what, why);
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// The places a NAME is looked for, in order (plugin_library.hpp).
std::vector<std::string> candidates(std::string_view name) {
  const std::string file = plugin_file_name(name);
  std::vector<std::string> out;
  const char* path = std::getenv("EPSUITE_PLUGIN_PATH");
  std::string_view dirs = path != nullptr ? path : "";
  while (!dirs.empty()) {
    const std::size_t colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    if (!dir.empty()) out.push_back((std::filesystem::path(dir) / file).string());
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
  }
  out.push_back(file);
  return out;
}

// The eps_ep_plugin_v<N> symbols (N = 2 .. 9) a library exports, for the message that it lacks v1.
std::vector<std::string> other_versions(void* library) {
  std::vector<std::string> out;
  for (int v = 2; v <= 9; ++v) {
    const std::string symbol = fmt::format("eps_ep_plugin_v{}", v);
    if (dlsym(library, symbol.c_str()) != nullptr) out.push_back(symbol);
  }
  return out;
}

Status check_table(const std::string& path, const eps_ep_plugin_v1_t& api) {
  if (api.abi_version != EPS_PLUGIN_ABI_VERSION_V1) {
    return refused(path,
                   fmt::format("its {} table has abi_version {}, this epsuite speaks version {} (rebuild "
                               "it against epsuite/ep_plugin_v1.h)",
                               EPS_PLUGIN_SYMBOL_V1, api.abi_version, EPS_PLUGIN_ABI_VERSION_V1));
  }
  const std::pair<const char*, bool> required[] = {{"name", api.name != nullptr},
                                                   {"version", api.version != nullptr},
                                                   {"properties", api.properties != nullptr},
                                                   {"init", api.init != nullptr},
                                                   {"dispatch", api.dispatch != nullptr},
                                                   {"combine", api.combine != nullptr},
                                                   {"release", api.release != nullptr},
                                                   {"finalize", api.finalize != nullptr},
                                                   {"last_error", api.last_error != nullptr}};
  for (const auto& [entry, present] : required) {
    if (!present)
      return refused(path, fmt::format("entry '{}' of its {} table is NULL", entry, EPS_PLUGIN_SYMBOL_V1));
  }
  if (!valid_name(api.name)) {
    return refused(path, fmt::format("its name '{}' must be 1-64 characters of [A-Za-z0-9._-]", api.name));
  }
  return Status();
}

Result<PluginLibrary> describe_library(const std::string& path, const eps_ep_plugin_v1_t* api) {
  if (api == nullptr) return refused(path, fmt::format("{} is a null symbol", EPS_PLUGIN_SYMBOL_V1));
  EPS_RETURN_IF_ERROR(check_table(path, *api));
  eps_plugin_properties_v1 declared{};
  if (api->properties(&declared) != EPS_PLUGIN_SUCCESS) {
    const char* message = api->last_error();
    return refused(path,
                   fmt::format("properties() failed: {}", message != nullptr ? message : "(no message)"));
  }
  Result<Capabilities> caps = plugin_capabilities(declared);
  if (!caps.ok()) return refused(path, caps.status().message());
  if (caps->cached_dispatch && api->dispatch_cached == nullptr) {
    return refused(path,
                   fmt::format("it declares cached dispatch but entry 'dispatch_cached' of its {} table "
                               "is NULL",
                               EPS_PLUGIN_SYMBOL_V1));
  }
  return PluginLibrary{api,
                       path,
                       api->name,
                       api->version,
                       std::move(caps).value(),
                       has(declared.memory, EPS_PLUGIN_MEMORY_HOST),
                       has(declared.memory, EPS_PLUGIN_MEMORY_DEVICE),
                       declared.checks_routing == 1};
}

// Opens one file: nullptr with the loader's message in `reason` when dlopen fails; a refusal for a library
// that loaded but is not a v1 plugin.
Result<std::shared_ptr<const PluginLibrary>> open_file(const std::string& path, std::string& reason) {
  void* library = dlopen_library(path.c_str());
  if (library == nullptr) {
    reason = load_error();
    return std::shared_ptr<const PluginLibrary>();
  }
  dlerror();
  const auto* api = static_cast<const eps_ep_plugin_v1_t*>(dlsym(library, EPS_PLUGIN_SYMBOL_V1));
  if (api == nullptr) {
    const std::vector<std::string> others = other_versions(library);
    return refused(path,
                   others.empty()
                       ? fmt::format("it has no symbol {} (not an epsuite EP plugin?)", EPS_PLUGIN_SYMBOL_V1)
                       : fmt::format("it has no symbol {}, only {}: it was built for another ABI version",
                                     EPS_PLUGIN_SYMBOL_V1, fmt::join(others, ", ")));
  }
  EPS_ASSIGN_OR_RETURN(PluginLibrary described, describe_library(path, api));
  return std::make_shared<const PluginLibrary>(std::move(described));
}

Result<std::shared_ptr<const PluginLibrary>> find_and_open(std::string_view spec) {
  if (spec.find('/') != std::string_view::npos) {
    std::string reason;
    EPS_ASSIGN_OR_RETURN(std::shared_ptr<const PluginLibrary> library, open_file(std::string(spec), reason));
    if (library == nullptr) return refused(spec, fmt::format("cannot be loaded: {}", reason));
    return library;
  }
  if (!valid_name(spec)) {
    return refused(spec, "a plugin is named by 1-64 characters of [A-Za-z0-9._-] or by a path holding a '/'");
  }
  std::vector<std::string> reasons;
  for (const std::string& path : candidates(spec)) {
    std::string reason;
    EPS_ASSIGN_OR_RETURN(std::shared_ptr<const PluginLibrary> library, open_file(path, reason));
    if (library == nullptr) {
      reasons.push_back(reason);
      continue;
    }
    if (library->name != spec) {
      return refused(path, fmt::format("it names itself '{}', not '{}'", library->name, spec));
    }
    return library;
  }
  return refused(spec, fmt::format("{} is neither in EPSUITE_PLUGIN_PATH nor on the library path: {}",
                                   plugin_file_name(spec), fmt::join(reasons, "; ")));
}

}  // namespace

std::string plugin_file_name(std::string_view name) { return fmt::format("libepsuite-plugin-{}.so", name); }

Result<std::shared_ptr<const PluginLibrary>> load_plugin(std::string_view spec) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const PluginLibrary>, std::less<>> by_spec;
  static std::map<std::string, std::shared_ptr<const PluginLibrary>, std::less<>> by_name;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = by_spec.find(spec); it != by_spec.end()) return it->second;
  EPS_ASSIGN_OR_RETURN(std::shared_ptr<const PluginLibrary> library, find_and_open(spec));
  const auto [named, fresh] = by_name.emplace(library->name, library);
  if (!fresh && named->second->api != library->api) {
    return refused(library->path,
                   fmt::format("its name '{}' is the name of the plugin already loaded from {}",
                               library->name, named->second->path));
  }
  by_spec.emplace(std::string(spec), named->second);  // one library, one PluginLibrary
  return named->second;
}

namespace {

constexpr std::uint32_t kLayoutBits = EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR) |
                                      EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_HT_EXPERT_MAJOR) |
                                      EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_LL);
constexpr std::uint32_t kTreeBits = EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_HT_RANK) |
                                    EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_HT_TWO_LEVEL) |
                                    EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_LL_WEIGHTED);
constexpr std::uint32_t kDtypeBits =
    EPS_PLUGIN_BIT(EPS_PLUGIN_DTYPE_BF16) | EPS_PLUGIN_BIT(EPS_PLUGIN_DTYPE_FP8);
constexpr std::uint32_t kMemoryBits =
    EPS_PLUGIN_BIT(EPS_PLUGIN_MEMORY_HOST) | EPS_PLUGIN_BIT(EPS_PLUGIN_MEMORY_DEVICE);

Status check_mask(std::string_view field, std::uint32_t mask, std::uint32_t allowed) {
  if (mask == 0) return invalid_argument(fmt::format("properties.{}", field), "declares nothing");
  if ((mask & ~allowed) != 0) {
    return invalid_argument(fmt::format("properties.{}", field),
                            "bits {:#x} are not in ABI v1 (allowed {:#x})", mask & ~allowed, allowed);
  }
  return Status();
}

Status check_limit(std::string_view field, std::int32_t value) {
  if (value >= 1) return Status();
  return invalid_argument(fmt::format("properties.{}", field), "must be >= 1, got {}", value);
}

}  // namespace

Result<Capabilities> plugin_capabilities(const eps_plugin_properties_v1& d) {
  EPS_RETURN_IF_ERROR(check_mask("layouts", d.layouts, kLayoutBits));
  EPS_RETURN_IF_ERROR(check_mask("trees", d.trees, kTreeBits));
  EPS_RETURN_IF_ERROR(check_mask("dtypes", d.dtypes, kDtypeBits));
  EPS_RETURN_IF_ERROR(check_mask("memory", d.memory, kMemoryBits));
  if ((d.open_order & ~d.layouts) != 0) {
    return invalid_argument("properties.open_order",
                            "names layouts {:#x} that properties.layouts ({:#x}) does not",
                            d.open_order & ~d.layouts, d.layouts);
  }
  const bool rank_major = has(d.layouts, EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR);
  const bool slot_layout =
      has(d.layouts, EPS_PLUGIN_LAYOUT_HT_EXPERT_MAJOR) || has(d.layouts, EPS_PLUGIN_LAYOUT_LL);
  if ((has(d.trees, EPS_PLUGIN_TREE_HT_RANK) || has(d.trees, EPS_PLUGIN_TREE_HT_TWO_LEVEL)) && !rank_major) {
    return invalid_argument("properties.trees",
                            "ht-rank and ht-two-level follow ht-rank-major, which it does not declare");
  }
  if (has(d.trees, EPS_PLUGIN_TREE_LL_WEIGHTED) && !slot_layout) {
    return invalid_argument("properties.trees",
                            "ll-weighted follows ht-expert-major or ll, neither declared");
  }
  if (d.cached_dispatch != 0 && d.cached_dispatch != 1) {
    return invalid_argument("properties.cached_dispatch", "must be 0 or 1, got {}", d.cached_dispatch);
  }
  if (d.checks_routing != 0 && d.checks_routing != 1) {
    return invalid_argument("properties.checks_routing", "must be 0 or 1, got {}", d.checks_routing);
  }
  EPS_RETURN_IF_ERROR(check_limit("max_ranks", d.max_ranks));
  EPS_RETURN_IF_ERROR(check_limit("max_experts", d.max_experts));
  EPS_RETURN_IF_ERROR(check_limit("max_top_k", d.max_top_k));
  EPS_RETURN_IF_ERROR(check_limit("max_hidden", d.max_hidden));
  EPS_RETURN_IF_ERROR(check_limit("max_tokens_per_rank", d.max_tokens_per_rank));

  Capabilities caps;
  const std::pair<int, Layout> layouts[] = {{EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR, Layout::kHtRankMajor},
                                            {EPS_PLUGIN_LAYOUT_HT_EXPERT_MAJOR, Layout::kHtExpertMajor},
                                            {EPS_PLUGIN_LAYOUT_LL, Layout::kLl}};
  for (const auto& [bit, layout] : layouts) {
    if (!has(d.layouts, bit)) continue;
    caps.layouts.push_back(layout);
    if (has(d.open_order, bit) && layout != Layout::kLl) caps.open_order.push_back(layout);
  }
  caps.ll_ordered = has(d.layouts, EPS_PLUGIN_LAYOUT_LL) && !has(d.open_order, EPS_PLUGIN_LAYOUT_LL);
  const std::pair<int, CombineTree> trees[] = {{EPS_PLUGIN_TREE_HT_RANK, CombineTree::kHtRank},
                                               {EPS_PLUGIN_TREE_HT_TWO_LEVEL, CombineTree::kHtTwoLevel},
                                               {EPS_PLUGIN_TREE_LL_WEIGHTED, CombineTree::kLlWeighted}};
  for (const auto& [bit, tree] : trees) {
    if (has(d.trees, bit)) caps.combine_trees.push_back(tree);
  }
  if (has(d.dtypes, EPS_PLUGIN_DTYPE_BF16)) caps.dtypes.push_back(PayloadType::kBf16);
  if (has(d.dtypes, EPS_PLUGIN_DTYPE_FP8)) caps.dtypes.push_back(PayloadType::kFp8);
  if (has(d.memory, EPS_PLUGIN_MEMORY_HOST)) caps.memory.push_back(MemoryKind::kHost);
  // Device memory: the plugin's own kind, or memory of a device the host addresses (taken as host memory).
  caps.memory.push_back(MemoryKind::kDevice);
  caps.cached_dispatch = d.cached_dispatch == 1;
  caps.max_ranks = d.max_ranks;
  caps.max_experts = d.max_experts;
  caps.max_top_k = d.max_top_k;
  caps.max_hidden = d.max_hidden;
  caps.max_tokens_per_rank = d.max_tokens_per_rank;
  return caps;
}

}  // namespace eps::transport
