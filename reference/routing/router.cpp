#include "reference/routing/router.hpp"

namespace eps::routing {

Status validate_router(const RouterConfig& config, std::int64_t num_experts, std::string_view prefix) {
  if (const auto* tc = std::get_if<TokenChoiceConfig>(&config)) {
    return validate_token_choice(*tc, num_experts, prefix);
  }
  return validate_expert_choice(std::get<ExpertChoiceConfig>(config), num_experts, prefix);
}

Result<Routing> route(const RouterConfig& config, const RoutingInput& input) {
  if (const auto* tc = std::get_if<TokenChoiceConfig>(&config)) return route_token_choice(*tc, input);
  return route_expert_choice(std::get<ExpertChoiceConfig>(config), input);
}

}  // namespace eps::routing
