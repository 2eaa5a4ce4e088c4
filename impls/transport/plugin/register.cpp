// Registers the resolver of `--transport plugin:NAME|PATH` (registry.hpp): the text after "plugin:" is
// loaded as an EP plugin (plugin_library.hpp) and registered as the transport "plugin:<its name>".
#include <fmt/format.h>

#include "impls/transport/plugin/plugin_library.hpp"
#include "impls/transport/plugin/plugin_transport.hpp"
#include "impls/transport/registry.hpp"

void eps_register_transport_plugin(eps::transport::TransportRegistry& registry) {
  using namespace eps::transport;
  registry.add_resolver("plugin", [](std::string_view spec) -> eps::Result<TransportEntry> {
    EPS_ASSIGN_OR_RETURN(std::shared_ptr<const PluginLibrary> library, load_plugin(spec));
    return TransportEntry{.name = "plugin:" + library->name,
                          .summary = fmt::format("EP plugin {} version {} ({})", library->name,
                                                 library->version, library->path),
                          // A plugin moves its bytes itself: the fabric selection (and chaos) does not apply.
                          .factory =
                              [library](const TransportConfig& config, const eps::fabric::FabricSelection&) {
                                return make_plugin_transport(library, config);
                              },
                          .capabilities = [library] { return library->capabilities; },
                          .uses_fabric = false};
  });
}
