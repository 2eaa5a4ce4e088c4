#include "impls/fabric/fabric_selection.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "impls/fabric/chaos/chaos_fabric.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/fabric/signal/signal_strategy.hpp"

namespace eps::fabric {

FabricSelection fabric_selection_from(const Params& params) {
  FabricSelection selection;
  selection.fabric = params.string("fabric");
  selection.signal = params.string("signal");
  selection.chaos = params.string("chaos");
  selection.allow_unsafe = params.enabled("allow-unsafe");
  selection.iface = params.string("iface");
  selection.proxy_threads = static_cast<int>(params.integer("proxy-threads"));
  if (params.defines("allow-fallback")) selection.allow_fallback = params.enabled("allow-fallback");
  if (params.defines("require-fabric")) selection.require_fabric = params.string("require-fabric");
  return selection;
}

Status validate_fabric_selection(const FabricSelection& s) {
  const FabricRegistry& registry = fabric_registry();
  if (registry.find(s.fabric, nullptr) == nullptr) {
    return invalid_argument("--fabric", "unknown fabric '{}'; registered: {}", s.fabric,
                            fmt::join(registry.names(), ", "));
  }
  if (!s.require_fabric.empty() &&
      (s.require_fabric == "auto" || !registry.find(s.require_fabric, nullptr))) {
    return invalid_argument("--require-fabric",
                            "must be a registered fabric other than auto, got '{}'; one of {}",
                            s.require_fabric, fmt::join(registry.names(), ", "));
  }
  if (!s.chaos.empty()) EPS_RETURN_IF_ERROR(parse_chaos(s.chaos).status());
  const std::vector<std::string>& signals = signal_strategy_names();
  if (std::find(signals.begin(), signals.end(), s.signal) == signals.end()) {
    return invalid_argument("--signal", "must be one of {{{}}}, got '{}'", fmt::join(signals, ", "),
                            s.signal);
  }
  const bool unordered = !s.chaos.empty() || registry.known_unordered(s.fabric);
  if (s.signal == "fabric-order" && unordered && !s.allow_unsafe) {
    return invalid_argument("--signal",
                            "fabric-order needs an ordered fabric, and {}{} does not keep put order "
                            "(docs/fabrics.md 6.2); pick imm-seq, recv-count or sender-barrier, or pass "
                            "--allow-unsafe for the negative control",
                            s.fabric, s.chaos.empty() ? "" : " under --chaos");
  }
  return Status();
}

std::string describe_selection(const FabricSelection& s) {
  std::string text = fmt::format("{}, signal {}", s.fabric, s.signal);
  if (!s.chaos.empty()) text += fmt::format(", chaos {}", s.chaos);
  if (s.allow_unsafe) text += ", allow-unsafe";
  if (!s.iface.empty()) text += fmt::format(", iface {}", s.iface);
  if (s.allow_fallback) text += ", allow-fallback";
  if (!s.require_fabric.empty()) text += fmt::format(", require {}", s.require_fabric);
  return text;
}

}  // namespace eps::fabric
