#include "harness/ref/ref_tool.hpp"

#include <array>

#include "harness/ref/ref_dispatch.hpp"
#include "harness/ref/ref_layer.hpp"
#include "harness/ref/ref_route.hpp"

namespace eps {

Result<Json> ref_eplb(const Json& input);  // harness/ref_eplb.cpp

// One line per tool; each tool lives in its own harness/ref_*.cpp.
std::span<const RefTool> ref_tools() {
  static const std::array<RefTool, 4> kTools = {
      RefTool{"route", "Routing reference: token choice and EC-DLM expert choice (docs/routing.md 3)",
              &run_ref_route},
      RefTool{"eplb", "EPLB policy placement and figures of merit (docs/eplb.md 8)", &ref_eplb},
      RefTool{"layer", "MoE layer reference: router, experts, combine tree, shared experts (docs/layer.md 4)",
              &run_ref_layer},
      RefTool{"dispatch",
              "Dispatch layout, expected receive metadata of every layout, bytes (docs/dispatch.md 5)",
              &run_ref_dispatch},
  };
  return kTools;
}

}  // namespace eps
