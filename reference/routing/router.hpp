// One router configuration of any kind (token choice, docs/routing.md 3.1-3.2, or expert choice,
// docs/routing.md 3.3-3.4) and the single entry point that runs it; the MoE layer and the CLI hold a
// RouterConfig and call `route`.
#pragma once

#include <string_view>
#include <variant>

#include "reference/common/status.hpp"
#include "reference/routing/expert_choice.hpp"
#include "reference/routing/routing.hpp"
#include "reference/routing/token_choice.hpp"

namespace eps::routing {

using RouterConfig = std::variant<TokenChoiceConfig, ExpertChoiceConfig>;

// Checks the configuration alone for E experts; errors name `prefix` + field ("router.k: ...").
Status validate_router(const RouterConfig& config, std::int64_t num_experts, std::string_view prefix = "");

// Validates the input and the configuration, then routes (route_token_choice / route_expert_choice).
Result<Routing> route(const RouterConfig& config, const RoutingInput& input);

}  // namespace eps::routing
