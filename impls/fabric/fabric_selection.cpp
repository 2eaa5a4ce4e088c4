#include "impls/fabric/fabric_selection.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "impls/fabric/chaos/chaos_fabric.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/fabric/signal/signal_strategy.hpp"

namespace eps::fabric {

FabricSelection fabric_selection_from(const Params& params) {
  return FabricSelection{params.string("fabric"), params.string("signal"),
                         params.string("chaos"),  params.enabled("allow-unsafe"),
                         params.string("iface"),  static_cast<int>(params.integer("proxy-threads"))};
}

Status validate_fabric_selection(const FabricSelection& s) {
  const FabricRegistry& registry = fabric_registry();
  if (registry.find(s.fabric, nullptr) == nullptr) {
    return invalid_argument("--fabric", "unknown fabric '{}'; registered: {}", s.fabric,
                            fmt::join(registry.names(), ", "));
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
  return text;
}

}  // namespace eps::fabric
