#include "impls/transport/direct/direct_transport.hpp"
#include "impls/transport/registry.hpp"

void eps_register_transport_direct(eps::transport::TransportRegistry& registry) {
  registry.add({.name = "direct",
                .summary = "host-initiated one-sided puts over --fabric with --signal (docs/fabrics.md 6)",
                .factory = eps::transport::make_direct_transport,
                .capabilities = eps::transport::direct_capabilities,
                .uses_fabric = true});
}
